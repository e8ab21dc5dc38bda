//! What a long job shows while it runs (progress bars, announced lines) and
//! how it stops (the first Ctrl-C or SIGTERM asks, the second exits).

use std::sync::Arc;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use sql2ddb_engine::{EntityProgress, RunProgress, StopSignal};

/// Prints the lines the run announces (its snapshot) on stderr.
pub(crate) async fn print_notes(progress: Arc<RunProgress>) {
    let mut seen = 0;
    loop {
        for line in progress.notes_after(seen).await {
            eprintln!("{line}");
            seen += 1;
        }
    }
}

/// The first Ctrl-C or SIGTERM asks the run to stop cleanly; the second
/// exits at once.
pub(crate) async fn stop_on_signals(stop: Arc<StopSignal>) {
    next_signal().await;
    eprintln!(
        "stopping: no new pages are read; the pages in flight are being written (Ctrl-C again to exit at once)"
    );
    stop.stop();
    next_signal().await;
    eprintln!("exiting at once: the report is not written");
    std::process::exit(crate::failure::EXIT_INTERRUPTED.into());
}

pub(crate) async fn next_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// One bar per entity: rows accounted for (written + rejected) out of the
/// counted total, with rate and ETA.
pub(crate) async fn draw_progress(progress: Arc<RunProgress>) {
    let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template(
        "{prefix:>14} [{bar:30}] {pos}/{len} rows  {per_sec}  ETA {eta}  {msg}",
    )
    .expect("template")
    .progress_chars("=> ");
    let mut shown: Vec<(Arc<EntityProgress>, ProgressBar)> = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    let update = |shown: &Vec<(Arc<EntityProgress>, ProgressBar)>| {
        for (e, bar) in shown {
            let total = EntityProgress::get(&e.total);
            bar.set_length(total.max(EntityProgress::get(&e.read)));
            let done = EntityProgress::get(&e.written)
                + EntityProgress::get(&e.rejected)
                + EntityProgress::get(&e.failed);
            bar.set_position(done);
            let rejected = EntityProgress::get(&e.rejected);
            if rejected > 0 {
                bar.set_message(format!("{rejected} rejected"));
            }
            if e.is_done() && !bar.is_finished() {
                bar.finish();
            }
        }
    };
    let _guard = ClearOnDrop(multi.clone());
    loop {
        tick.tick().await;
        for e in progress.entities() {
            if !shown.iter().any(|(s, _)| Arc::ptr_eq(s, &e)) {
                let bar = multi.add(
                    ProgressBar::new(0)
                        .with_style(style.clone())
                        .with_prefix(e.name.clone()),
                );
                shown.push((e, bar));
            }
        }
        update(&shown);
    }
}

struct ClearOnDrop(MultiProgress);

impl Drop for ClearOnDrop {
    fn drop(&mut self) {
        let _ = self.0.clear();
    }
}
