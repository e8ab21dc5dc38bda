use super::*;

fn s(text: &str) -> AttrValue {
    AttrValue::S(text.into())
}

/// An item of a key with more items in its batch.
fn many(key: &AttrValue, units: u64) -> Sent<'_> {
    Sent {
        key,
        units,
        alone: false,
    }
}

/// The only item of its key in its batch.
fn lone(key: &AttrValue, units: u64) -> Sent<'_> {
    Sent {
        key,
        units,
        alone: true,
    }
}

#[tokio::test(start_paused = true)]
async fn nothing_waits_until_the_table_refuses() {
    let pacer = Pacer::new();
    let start = Instant::now();
    for _ in 0..100 {
        pacer.admit(25).await;
    }
    assert_eq!(Instant::now(), start);
    assert_eq!(pacer.snapshot().rate, None);
    assert_eq!(pacer.key_turn(&s("A"), 1, start), None);
}

#[tokio::test(start_paused = true)]
async fn a_refusal_sets_the_rate_to_what_the_table_admitted_over_the_last_second() {
    let pacer = Pacer::new();
    let key = s("K");
    // 1,500 units written over the first second, in 60 calls.
    for _ in 0..60 {
        let sent = Instant::now();
        pacer.answered(sent, &[many(&key, 25)], &[], false);
        tokio::time::advance(Duration::from_millis(16)).await;
    }
    let sent = Instant::now();
    let other = s("X");
    let other2 = s("X2");
    // Refused: 100 units of 1,600, over the share that is the table's.
    pacer.answered(sent, &[], &[lone(&other, 50), lone(&other2, 50)], false);
    // The first refusal: 0.8 of it (a start at full speed emptied the
    // partitions' buckets).
    let rate = pacer.snapshot().rate.expect("learned");
    assert!((1_120.0..=1_200.0).contains(&rate), "{rate}");
    // 1,120-1,200 units a second: 300 units take about 0.15 s beyond the
    // bucket's tenth of a second.
    let start = Instant::now();
    for _ in 0..12 {
        pacer.admit(25).await;
    }
    let took = Instant::now() - start;
    assert!(
        took >= Duration::from_millis(120) && took <= Duration::from_millis(200),
        "{took:?}"
    );
    // A call sent before the rate was set does not set it again.
    let (y, z) = (s("Y"), s("Z"));
    pacer.answered(
        sent - Duration::from_millis(1),
        &[],
        &[lone(&y, 1), lone(&z, 1)],
        false,
    );
    assert_eq!(pacer.snapshot().cuts, 1);
}

/// Callers asking for 50 units at a time for `secs` seconds.
async fn busy(pacer: &Pacer, secs: f64) {
    let start = Instant::now();
    while Instant::now() - start < Duration::from_secs_f64(secs) {
        pacer.admit(50).await;
    }
}

#[tokio::test(start_paused = true)]
async fn the_rate_grows_slowly_near_the_rate_refused_then_fast() {
    let pacer = Pacer::new();
    let sent = Instant::now();
    for _ in 0..10 {
        pacer.answered(sent, &[many(&s("A"), 100)], &[], false);
    }
    let (b, c) = (s("B"), s("C"));
    pacer.answered(sent, &[], &[lone(&b, 30), lone(&c, 30)], false);
    let first = pacer.snapshot().rate.unwrap();
    assert_eq!(first, 1_000.0 * FIRST_HEADROOM);
    // Callers wait: it grows back to 0.9 of the 1,000 the table admitted,
    // then by half a percent a tick while the refusal is recent.
    busy(&pacer, 1.0).await;
    let near = pacer.snapshot().rate.unwrap();
    assert!((900.0..=960.0).contains(&near), "{near}");
    // Past PROBE_FOR without a refusal: 3% a tick again.
    busy(&pacer, 2.0).await;
    let grown = pacer.snapshot().rate.unwrap();
    assert!(grown > 1_200.0, "{grown}");
    // Idle for a while: it does not grow without callers waiting.
    tokio::time::advance(Duration::from_secs(5)).await;
    pacer.admit(1).await;
    let idle = pacer.snapshot().rate.unwrap();
    assert!(idle <= grown * GROWTH, "{idle} {grown}");
}

#[tokio::test(start_paused = true)]
async fn a_refused_key_waits_its_turn_and_others_do_not() {
    let pacer = Pacer::new();
    let (hot, cold) = (s("HOT"), s("COLD"));
    pacer.answered(Instant::now(), &[many(&cold, 1)], &[many(&hot, 1)], false);
    let now = Instant::now();
    // The first item of the hot key goes now, the next one a millisecond
    // later (1,000 units a second); the cold key is not paced.
    assert_eq!(pacer.key_rate(&hot), Some(KEY_START_RATE));
    assert_eq!(pacer.key_turn(&hot, 1, now), None);
    let turn = now + Duration::from_millis(1);
    assert_eq!(pacer.key_turn(&hot, 1, now), Some(turn));
    assert_eq!(
        pacer.key_turn(&hot, 1, now),
        Some(turn),
        "asking again takes no turn"
    );
    assert_eq!(pacer.key_turn(&cold, 1, now), None);
    assert_eq!(pacer.key_turn(&cold, 1, now), None);
    assert_eq!(pacer.key_turn(&hot, 1, turn), None);
    // A call in flight when it was first refused is refused too: cut at
    // once to what the table admitted of it (nothing: a quarter at least).
    let sent = Instant::now();
    pacer.answered(sent, &[], &[many(&hot, 1)], false);
    assert_eq!(pacer.key_rate(&hot), Some(KEY_START_RATE * KEY_FLOOR));
    // Refused again within a tick: not cut again.
    pacer.answered(Instant::now(), &[], &[many(&hot, 1)], false);
    assert_eq!(pacer.key_rate(&hot), Some(KEY_START_RATE * KEY_FLOOR));
    // 20 units written in the tick after, then refused: cut to what was
    // admitted (200 a second over its 0.1 s paced), within 0.7 of it.
    for _ in 0..20 {
        pacer.answered(Instant::now(), &[many(&hot, 1)], &[], false);
    }
    tokio::time::advance(TICK).await;
    pacer.answered(Instant::now(), &[], &[many(&hot, 1)], false);
    let cut = pacer.key_rate(&hot).unwrap();
    assert!((cut - 175.0).abs() < 1e-6, "{cut}");
    // By a call sent before that cut: not again.
    tokio::time::advance(TICK).await;
    pacer.answered(Instant::now() - TICK * 2, &[], &[many(&hot, 1)], false);
    assert_eq!(pacer.key_rate(&hot), Some(cut));
    // Its items wait and none is refused: each clean tick in a row grows
    // it by one more factor of KEY_GROWTH.
    let mut rate = cut;
    for n in 1..=3 {
        let now = Instant::now();
        while pacer.key_turn(&hot, 1, now).is_none() {}
        tokio::time::advance(TICK).await;
        let _ = pacer.key_turn(&hot, 1, Instant::now());
        rate *= KEY_GROWTH.powi(n);
        let grown = pacer.key_rate(&hot).unwrap();
        assert!((grown - rate).abs() < 1e-6, "tick {n}: {grown}, not {rate}");
    }
    assert_eq!(pacer.snapshot().keys, 1);
}

#[tokio::test(start_paused = true)]
async fn the_keys_paced_are_bounded() {
    let pacer = Pacer::new();
    for n in 0..(MAX_KEYS + 10) {
        tokio::time::advance(Duration::from_micros(10)).await;
        pacer.answered(Instant::now(), &[], &[many(&s(&format!("K{n}")), 1)], false);
    }
    let keys = pacer.snapshot().keys;
    assert!((MAX_KEYS / 2..=MAX_KEYS).contains(&keys), "{keys}");
    // The newest are kept.
    let now = Instant::now();
    let newest = s(&format!("K{}", MAX_KEYS + 9));
    assert_eq!(pacer.key_rate(&newest), Some(KEY_START_RATE));
    assert_eq!(pacer.key_rate(&s("K0")), None);
    assert_eq!(pacer.key_turn(&newest, 1, now), None);
    assert!(pacer.key_turn(&newest, 1, now).is_some());
}

#[tokio::test(start_paused = true)]
async fn a_key_with_more_items_is_paced_alone_and_lone_keys_pace_the_table() {
    let pacer = Pacer::new();
    let (a, b, c) = (s("A"), s("B"), s("C"));
    pacer.answered(Instant::now(), &[many(&c, 1_000)], &[], false);
    // Two keys of a collection refused: their partition's news.
    pacer.answered(Instant::now(), &[], &[many(&a, 1), many(&b, 1)], false);
    assert_eq!(pacer.snapshot().rate, None);
    assert_eq!(pacer.key_rate(&a), Some(KEY_START_RATE));
    // Refused whole with one key: still its partition's.
    tokio::time::advance(Duration::from_millis(1)).await;
    pacer.answered(Instant::now(), &[], &[many(&a, 1)], true);
    assert_eq!(pacer.snapshot().rate, None);
    // Refused whole with many lone keys: what a service failing calls at
    // random does too; the concurrency halves, the rate is not set.
    let lone_keys: Vec<AttrValue> = (0..25).map(|n| s(&format!("L{n}"))).collect();
    let all: Vec<Sent<'_>> = lone_keys.iter().map(|k| lone(k, 1)).collect();
    pacer.answered(Instant::now(), &[], &all, true);
    assert_eq!(pacer.snapshot().rate, None);
    // One lone key refused: not yet; two in one call: the table's limit.
    let (x, y) = (s("X"), s("Y"));
    pacer.answered(Instant::now(), &[], &[lone(&x, 30)], false);
    assert_eq!(pacer.snapshot().rate, None);
    pacer.answered(Instant::now(), &[], &[lone(&x, 30), lone(&y, 30)], false);
    assert_eq!(pacer.snapshot().rate, Some(1_000.0 * FIRST_HEADROOM));
    // Lone keys are not paced on their own: they have no more items.
    assert_eq!(pacer.key_rate(&x), None);
}

#[tokio::test(start_paused = true)]
async fn a_small_share_of_refusals_is_taken_for_faults() {
    let pacer = Pacer::new();
    let key = s("K");
    for _ in 0..40 {
        pacer.answered(Instant::now(), &[many(&key, 25)], &[], false);
    }
    // A few calls, one answered in part: too few units to say anything.
    let few = Pacer::new();
    few.answered(Instant::now(), &[many(&key, 50)], &[], false);
    let (a, b) = (s("A"), s("B"));
    few.answered(Instant::now(), &[], &[lone(&a, 25), lone(&b, 25)], false);
    assert_eq!(few.snapshot().rate, None);
    // 2 units of 1,002 refused: not the table's limit.
    let (x, y) = (s("X"), s("Y"));
    pacer.answered(Instant::now(), &[], &[lone(&x, 1), lone(&y, 1)], false);
    assert_eq!(pacer.snapshot().rate, None);
    // 100 more: now it is.
    let (v, w) = (s("V"), s("W"));
    pacer.answered(Instant::now(), &[], &[lone(&v, 50), lone(&w, 50)], false);
    assert_eq!(pacer.snapshot().rate, Some(1_000.0 * FIRST_HEADROOM));
}

#[tokio::test(start_paused = true)]
async fn a_paced_key_s_call_refused_whole_cuts_it() {
    // A call whose items are all of one paced key, refused whole: its
    // partition had room for none of them (the calls of a paced key carry
    // an item or two as its turns come), so its rate is cut even while no
    // partial answer shows the table at a limit; a call of several keys
    // refused whole is not (see the test below).
    let pacer = Pacer::new();
    let (hot, cold) = (s("HOT"), s("COLD"));
    for _ in 0..40 {
        pacer.answered(Instant::now(), &[many(&cold, 25)], &[], false);
    }
    pacer.answered(Instant::now(), &[], &[many(&hot, 1), many(&hot, 1)], true);
    assert_eq!(pacer.key_rate(&hot), Some(KEY_START_RATE), "entered");
    tokio::time::advance(TICK).await;
    pacer.answered(Instant::now(), &[], &[many(&hot, 1)], true);
    assert_eq!(pacer.key_rate(&hot), Some(KEY_START_RATE * KEY_FLOOR));
    assert_eq!(
        pacer.snapshot().rate,
        None,
        "its partition's, not the table's"
    );
}

#[tokio::test(start_paused = true)]
async fn a_call_refused_whole_counts_only_while_partial_answers_show_a_limit() {
    let pacer = Pacer::new();
    let key = s("K");
    for _ in 0..40 {
        pacer.answered(Instant::now(), &[many(&key, 25)], &[], false);
    }
    // Refused whole, many keys of collections: no partial answer refused
    // anything, so it may be a fault: nothing learned.
    let (a, b, c) = (s("A"), s("B"), s("C"));
    let whole = [many(&a, 10), many(&b, 10), many(&c, 10)];
    pacer.answered(Instant::now(), &[], &whole, true);
    assert_eq!(pacer.snapshot().rate, None);
    assert_eq!(pacer.key_rate(&a), Some(KEY_START_RATE), "entered, not cut");
    tokio::time::advance(TICK).await;
    pacer.answered(Instant::now(), &[], &whole, true);
    assert_eq!(pacer.key_rate(&a), Some(KEY_START_RATE), "still not cut");
    // Partial answers refusing 6% of the units: the table is at a limit,
    // and the same call refused whole now sets its rate.
    pacer.answered(Instant::now(), &[], &[many(&b, 70)], false);
    assert_eq!(
        pacer.snapshot().rate,
        None,
        "a collection's refusal is its partition's"
    );
    pacer.answered(Instant::now(), &[], &whole, true);
    assert_eq!(pacer.snapshot().rate, Some(1_000.0 * FIRST_HEADROOM));
    assert!(
        pacer.key_rate(&a).unwrap() < KEY_START_RATE,
        "and cuts its keys"
    );
}

#[tokio::test(start_paused = true)]
async fn calls_of_one_item_pace_the_table_by_their_throttles_over_the_last_second() {
    let pacer = Pacer::new();
    let keys: Vec<AttrValue> = (0..2_000).map(|i| s(&format!("K{i}"))).collect();
    // 1,500 one-unit writes admitted over the first second, one a call.
    for key in &keys[..1_500] {
        pacer.answered_one(Instant::now(), lone(key, 1), false);
        tokio::time::advance(Duration::from_micros(660)).await;
    }
    // Throttles of keys alone in their pages, one a call: the first is a
    // partition's news; with the second (and 5% of the second's units
    // refused) the table is at its limit.
    for key in &keys[1_500..1_580] {
        pacer.answered_one(Instant::now(), lone(key, 1), true);
    }
    let rate = pacer.snapshot().rate.expect("the table's rate learned");
    assert!((1_100.0..=1_300.0).contains(&rate), "{rate}");
    assert_eq!(pacer.snapshot().cuts, 1, "once a tick");
    assert_eq!(pacer.snapshot().keys, 0, "no key paced on its own");
    // A key with more items in its page is paced on its own, and its next
    // item waits its turn.
    let hot = s("HOT");
    pacer.answered_one(Instant::now(), many(&hot, 1), true);
    assert_eq!(pacer.key_rate(&hot), Some(KEY_START_RATE));
    let now = Instant::now();
    assert_eq!(pacer.key_turn(&hot, 1, now), None);
    assert!(pacer.key_turn(&hot, 1, now).is_some(), "the next waits");
}

#[tokio::test(start_paused = true)]
async fn one_throttle_a_second_of_calls_of_one_item_does_not_pace_the_table() {
    let pacer = Pacer::new();
    let keys: Vec<AttrValue> = (0..1_000).map(|i| s(&format!("K{i}"))).collect();
    let big = s("BIG");
    // Five seconds of 1,000 units admitted a second and one item of 60
    // units throttled each second: over 5% of the units refused, but by
    // one key alone of its page at a time, a partition's news.
    for _ in 0..5 {
        for key in &keys {
            pacer.answered_one(Instant::now(), lone(key, 1), false);
            tokio::time::advance(Duration::from_millis(1)).await;
        }
        pacer.answered_one(Instant::now(), lone(&big, 60), true);
    }
    assert_eq!(pacer.snapshot().rate, None, "{:?}", pacer.snapshot());
    // A second throttle within the second: the table's limit.
    let other = s("OTHER");
    pacer.answered_one(Instant::now(), lone(&other, 60), true);
    assert!(pacer.snapshot().rate.is_some());
}

/// Paces `keys` from their first refusal, then keeps their items coming
/// for `secs` seconds, each refused once more a tick after it was paced
/// (cut to a quarter: nothing of them was admitted).
async fn settle(pacer: &Pacer, keys: &[AttrValue], secs: u64) {
    let refused: Vec<Sent<'_>> = keys.iter().map(|k| many(k, 1)).collect();
    pacer.answered(Instant::now(), &[], &refused, false);
    tokio::time::advance(TICK).await;
    pacer.answered(Instant::now(), &[], &refused, false);
    for _ in 0..secs * 10 {
        tokio::time::advance(TICK).await;
        for k in keys {
            // Asked, not waited for: the rates neither grow nor fall.
            let _ = pacer.item_turn(k, 0, true, Instant::now());
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_key_first_refused_once_others_settled_starts_at_their_rate() {
    let pacer = Pacer::new();
    // The first keys start at DynamoDB's limit for a partition.
    let settled: Vec<AttrValue> = (0..3).map(|n| s(&format!("S{n}"))).collect();
    settle(&pacer, &settled, 1).await;
    let rate = KEY_START_RATE * KEY_FLOOR;
    assert_eq!(pacer.key_rate(&settled[0]), Some(rate));
    // Paced a second and seen lately: a key refused now starts at their
    // rate, not at a partition's limit.
    let new = s("NEW");
    pacer.answered(Instant::now(), &[], &[many(&new, 1)], false);
    assert_eq!(pacer.key_rate(&new), Some(rate));
    // Keys gone quiet for a second say nothing of the partitions now.
    tokio::time::advance(SETTLED_AFTER).await;
    let late = s("LATE");
    pacer.answered(Instant::now(), &[], &[many(&late, 1)], false);
    assert_eq!(pacer.key_rate(&late), Some(KEY_START_RATE));
}

#[tokio::test(start_paused = true)]
async fn a_key_of_many_items_is_paced_from_its_first_once_keys_settled() {
    let pacer = Pacer::new();
    let (first, lone_key) = (s("FIRST"), s("LONE"));
    // Nothing settled: its items go unpaced until refused.
    let now = Instant::now();
    assert_eq!(pacer.item_turn(&first, 1, true, now), KeyTurn::Unpaced);
    assert_eq!(pacer.item_turn(&first, 1, true, now), KeyTurn::Unpaced);
    let settled: Vec<AttrValue> = (0..3).map(|n| s(&format!("S{n}"))).collect();
    settle(&pacer, &settled, 1).await;
    let rate = KEY_START_RATE * KEY_FLOOR;
    // Settled: a new key of many items is paced at their rate from its
    // first item (4 ms a unit at 250 a second).
    let (new, now) = (s("NEW"), Instant::now());
    assert_eq!(pacer.item_turn(&new, 1, true, now), KeyTurn::Taken);
    assert_eq!(pacer.key_rate(&new), Some(rate));
    let next = now + Duration::from_millis(4);
    assert_eq!(pacer.item_turn(&new, 1, true, now), KeyTurn::Later(next));
    assert_eq!(pacer.key_turn(&new, 1, now), Some(next));
    // A key alone in its batch is not: it has no more items to pace.
    assert_eq!(pacer.item_turn(&lone_key, 1, false, now), KeyTurn::Unpaced);
    assert_eq!(pacer.key_rate(&lone_key), None);
    assert_eq!(pacer.snapshot().keys, 4);
}
