//! Multipart uploads against moto's S3: parts are cut at `PART_SIZE`
//! whatever the sizes of the writes, so the number of parts (and the
//! memory an upload holds) depends on the object's size alone.

use sql2ddb_s3::{S3Options, S3Prefix, PART_SIZE};
use sql2ddb_testkit::support::{Bucket, Moto};

/// Bytes that differ from part to part, so a part sent twice or out of
/// order would show.
fn bytes(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i % 251) as u8 ^ (i / PART_SIZE) as u8)
        .collect()
}

/// Uploads `writes` (their sizes) as object `key`; returns the object's
/// bytes and ETag as S3 has them.
async fn upload(url: &str, key: &str, writes: &[usize]) -> (Vec<u8>, Vec<u8>, String) {
    let bucket = Bucket::create(url, "upload").await;
    let s3 = &bucket.client;
    let opts = S3Options {
        endpoint: Some(url.to_string()),
        region: Some("us-east-1".into()),
        aws: None,
    };
    let place = S3Prefix::open(&format!("s3://{}/out", bucket.name), &opts)
        .await
        .unwrap();
    let sent = bytes(writes.iter().sum());
    let mut upload = place.upload(key).await.unwrap();
    let mut at = 0;
    for &n in writes {
        upload.write(&sent[at..at + n]).await.unwrap();
        at += n;
    }
    upload.finish().await.unwrap();
    let object = s3
        .get_object()
        .bucket(&bucket.name)
        .key(format!("out/{key}"))
        .send()
        .await
        .unwrap();
    let etag = object
        .e_tag()
        .unwrap_or_default()
        .trim_matches('"')
        .to_string();
    let got = object.body.collect().await.unwrap().into_bytes().to_vec();
    (sent, got, etag)
}

/// Uploads `writes` and checks the object holds every byte written, in
/// `parts` parts (a multipart ETag ends with `-N`, N the number of parts).
async fn check_upload(key: &str, writes: &[usize], parts: usize) {
    let s3 = Moto::s3();
    let (sent, got, etag) = upload(s3.url(), key, writes).await;
    assert!(
        got == sent,
        "the object holds {} bytes, not the {} written",
        got.len(),
        sent.len()
    );
    assert!(
        etag.ends_with(&format!("-{parts}")),
        "{writes:?} bytes written: {parts} parts expected, ETag {etag}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_write_of_two_parts_and_more_is_cut_into_parts_of_part_size() {
    // Two full parts and a tail of 5 bytes.
    check_upload("one-write", &[2 * PART_SIZE + 5], 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_that_straddle_a_part_fill_it_exactly_before_the_next() {
    // 3 + 7 + 7 MiB: parts of 8, 8 and 1 MiB (not 10 and 7, cut where a
    // write happened to end).
    check_upload("straddle", &[3 << 20, 7 << 20, 7 << 20], 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_object_is_uploaded_as_one_empty_part() {
    check_upload("empty", &[0], 1).await;
}
