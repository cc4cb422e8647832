//! The executor port: spawning tasks, aborting them, and joining them with a typed outcome.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::channel::oneshot;
use futures::FutureExt as _;

use super::BoxFuture;
use crate::limits::MAX_DIAGNOSTIC_BYTES;

/// Runs tasks concurrently. Implementations: `TokioEnv`, `MadsimEnv`.
///
/// Object-safe so an [`Env`](super::Env) can hold it as `Arc<dyn Executor>`.
pub trait Executor: Send + Sync {
    /// Starts `task`. A panic inside it is caught and reported by [`TaskHandle::join`] as
    /// [`JoinError::Panicked`]; it never tears down the executor.
    fn spawn(&self, task: BoxFuture<'static, ()>) -> TaskHandle;
}

/// How a task failed to run to completion.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum JoinError {
    /// The task panicked; `message` is the panic text, bounded to
    /// [`MAX_DIAGNOSTIC_BYTES`](crate::limits::MAX_DIAGNOSTIC_BYTES).
    #[error("task panicked: {message}")]
    Panicked { message: String },
    /// The task was aborted (or its runtime shut down) before it completed.
    #[error("task was aborted")]
    Aborted,
}

/// What an executor implementation provides for one spawned task. Public so other
/// executors (e.g. a simulator's) can produce [`TaskHandle`]s.
pub trait TaskControl: Send + Sync {
    /// Requests cancellation; a no-op once the task has finished.
    fn abort(&self);
    /// Whether the task has completed, panicked or been aborted.
    fn is_finished(&self) -> bool;
    /// Waits for the task's outcome.
    fn join(self: Box<Self>) -> BoxFuture<'static, Result<(), JoinError>>;
}

/// A handle to a spawned task. Dropping it detaches the task (it keeps running), as with
/// tokio's and madsim's join handles.
pub struct TaskHandle {
    control: Box<dyn TaskControl>,
}

impl TaskHandle {
    pub fn new(control: Box<dyn TaskControl>) -> TaskHandle {
        TaskHandle { control }
    }

    /// Requests cancellation: the task is dropped at its next suspension point and
    /// [`TaskHandle::join`] reports [`JoinError::Aborted`]. No effect once it has finished.
    pub fn abort(&self) {
        self.control.abort();
    }

    pub fn is_finished(&self) -> bool {
        self.control.is_finished()
    }

    /// Waits for the task: `Ok(())` if it ran to completion.
    pub fn join(self) -> BoxFuture<'static, Result<(), JoinError>> {
        self.control.join()
    }
}

impl std::fmt::Debug for TaskHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskHandle").field("finished", &self.is_finished()).finish()
    }
}

/// A spawned task that produces a value: see [`spawn_with_result`].
pub struct SpawnedTask<T> {
    pub handle: TaskHandle,
    /// Receives the value once the task completes; cancelled if it panics or is aborted.
    pub result: oneshot::Receiver<T>,
}

impl<T: Send + 'static> SpawnedTask<T> {
    pub fn abort(&self) {
        self.handle.abort();
    }

    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }

    /// Waits for the task and returns its value.
    pub fn join(self) -> BoxFuture<'static, Result<T, JoinError>> {
        Box::pin(async move {
            self.handle.join().await?;
            // The value is sent in the same poll that completes the task, so a completed task
            // has always sent it; a missing value can only mean the task did not complete.
            self.result.await.map_err(|_| JoinError::Aborted)
        })
    }
}

/// Spawns `fut` on `exec` and hands its output back through a oneshot channel.
///
/// ```
/// # use keel::env::{spawn_with_result, Executor};
/// # async fn demo(exec: &dyn Executor) {
/// let task = spawn_with_result(exec, async { 6 * 7 });
/// assert_eq!(task.join().await, Ok(42));
/// # }
/// ```
pub fn spawn_with_result<T, F>(exec: &dyn Executor, fut: F) -> SpawnedTask<T>
where
    T: Send + 'static,
    F: Future<Output = T> + Send + 'static,
{
    let (tx, rx) = oneshot::channel();
    let handle = exec.spawn(Box::pin(async move {
        // The receiver may have been dropped; the value is then simply discarded.
        let _ = tx.send(fut.await);
    }));
    SpawnedTask { handle, result: rx }
}

/// Wraps a task so a panic becomes a value instead of unwinding into the runtime (madsim
/// would otherwise abort the whole simulation). Executors spawn this and map `Err` to
/// [`JoinError::Panicked`].
pub(crate) fn catch_panic(
    task: BoxFuture<'static, ()>,
) -> impl Future<Output = Result<(), JoinError>> + Send + 'static {
    // AssertUnwindSafe: after a panic the task's own state is dropped, never observed again;
    // state it shared with others is exactly as consistent as under tokio's own catching.
    AssertUnwindSafe(task)
        .catch_unwind()
        .map(|outcome| outcome.map_err(|payload| panicked(payload.as_ref())))
}

/// [`JoinError::Panicked`] with the payload's text, bounded.
pub(crate) fn panicked(payload: &(dyn Any + Send)) -> JoinError {
    let text = if let Some(s) = payload.downcast_ref::<&'static str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.as_str()
    } else {
        "panic payload is not a string"
    };
    JoinError::Panicked { message: bounded(text, MAX_DIAGNOSTIC_BYTES) }
}

// Cuts at a char boundary at or below `max_bytes`.
fn bounded(text: &str, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text.to_owned();
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panic_payloads_become_bounded_messages() {
        assert_eq!(panicked(&"boom"), JoinError::Panicked { message: "boom".into() });
        assert_eq!(panicked(&String::from("bang")), JoinError::Panicked { message: "bang".into() });
        assert_eq!(
            panicked(&17u32),
            JoinError::Panicked { message: "panic payload is not a string".into() }
        );
        let long = "é".repeat(MAX_DIAGNOSTIC_BYTES); // 2 bytes per char
        let JoinError::Panicked { message } = panicked(&long) else { panic!("not Panicked") };
        assert_eq!(message.len(), MAX_DIAGNOSTIC_BYTES);
        let odd = format!("a{long}"); // the limit now falls inside a char
        let JoinError::Panicked { message } = panicked(&odd) else { panic!("not Panicked") };
        assert_eq!(message.len(), MAX_DIAGNOSTIC_BYTES - 1);
    }

    #[test]
    fn catch_panic_turns_a_panic_into_an_error() {
        let ok = futures::executor::block_on(catch_panic(Box::pin(async {})));
        assert_eq!(ok, Ok(()));
        let err =
            futures::executor::block_on(catch_panic(Box::pin(async { panic!("inside task") })));
        assert_eq!(err, Err(JoinError::Panicked { message: "inside task".into() }));
    }

    /// An executor that runs each task to completion on spawn (enough to test the wrappers).
    struct Inline;
    struct Done(Result<(), JoinError>);
    impl TaskControl for Done {
        fn abort(&self) {}
        fn is_finished(&self) -> bool {
            true
        }
        fn join(self: Box<Self>) -> BoxFuture<'static, Result<(), JoinError>> {
            Box::pin(async move { self.0 })
        }
    }
    impl Executor for Inline {
        fn spawn(&self, task: BoxFuture<'static, ()>) -> TaskHandle {
            TaskHandle::new(Box::new(Done(futures::executor::block_on(catch_panic(task)))))
        }
    }

    #[test]
    fn spawn_with_result_returns_the_value_or_the_join_error() {
        let task = spawn_with_result(&Inline, async { 6 * 7 });
        assert!(task.is_finished());
        assert_eq!(futures::executor::block_on(task.join()), Ok(42));
        let task = spawn_with_result(&Inline, async {
            if true {
                panic!("no value");
            }
            1
        });
        assert_eq!(
            futures::executor::block_on(task.join()),
            Err(JoinError::Panicked { message: "no value".into() })
        );
    }
}
