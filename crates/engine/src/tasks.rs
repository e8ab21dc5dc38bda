//! Waiting for a set of tasks that each may fail.

use tokio::task::JoinSet;

/// Waits for every task of `tasks`; the first error aborts the others and
/// is returned. A panic in a task is raised again here.
pub(crate) async fn first_error<E: Send + 'static>(
    mut tasks: JoinSet<Result<(), E>>,
) -> Result<(), E> {
    let mut result = Ok(());
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                if result.is_ok() {
                    result = Err(e);
                    tasks.abort_all();
                }
            }
            Err(e) if e.is_cancelled() => {}
            Err(panic) => std::panic::resume_unwind(panic.into_panic()),
        }
    }
    result
}
