//! A created sandbox's control channel: what an OCI runtime's `start` and
//! `kill` tell a sentry that is already running.
//!
//! The channel is a FIFO in the container's state directory, which the
//! sentry holds open for reading and writing (so it never sees end of
//! file, and a writer never blocks for want of a reader). Each message is
//! two bytes, a command and its argument, written at once: writes of at
//! most `PIPE_BUF` bytes are atomic, so messages of several writers never
//! interleave.

use std::os::fd::OwnedFd;
use std::sync::{Arc, Condvar, Mutex};

use crate::kernel::Kernel;
use crate::signal::{SigInfo, code};
use crate::task::INIT_PID;

/// A message on the control channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message {
    /// Run the first process's program.
    Start,
    /// Send a signal to the first process (`all`: to every process).
    Signal { signal: u8, all: bool },
}

impl Message {
    pub fn encode(self) -> [u8; 2] {
        match self {
            Message::Start => [b's', 0],
            Message::Signal { signal, all: false } => [b'k', signal],
            Message::Signal { signal, all: true } => [b'K', signal],
        }
    }

    pub fn decode(bytes: [u8; 2]) -> Option<Message> {
        match bytes {
            [b's', 0] => Some(Message::Start),
            [b'k', signal] => Some(Message::Signal { signal, all: false }),
            [b'K', signal] => Some(Message::Signal { signal, all: true }),
            _ => None,
        }
    }
}

/// Whether the first process may run: None until the start or the
/// sandbox's end decides.
#[derive(Default)]
struct Gate {
    decided: Mutex<Option<bool>>,
    changed: Condvar,
}

impl Gate {
    fn open(&self, run: bool) {
        let mut d = self.decided.lock().unwrap();
        if d.is_none() {
            *d = Some(run);
            self.changed.notify_all();
        }
    }
}

/// The first process's wait for the start.
pub struct StartGate(Arc<Gate>);

impl StartGate {
    /// Waits for the start: true to run the program, false if the sandbox
    /// is ending first.
    pub fn wait(self) -> bool {
        let mut d = self.0.decided.lock().unwrap();
        loop {
            if let Some(run) = *d {
                return run;
            }
            d = self.0.changed.wait(d).unwrap();
        }
    }
}

/// A host thread that reads the control channel and does what it says.
pub struct Controller {
    stop: OwnedFd,
    gate: Arc<Gate>,
    handle: std::thread::JoinHandle<()>,
}

impl Controller {
    /// Signals are sent as from outside the sandbox's pid namespace (pid
    /// 0) by `uid`, as the forwarder sends them.
    pub fn start(kernel: Arc<Kernel>, uid: u32, channel: OwnedFd) -> Controller {
        use rustix::event::{EventfdFlags, PollFd, PollFlags, eventfd, poll};
        let stop = eventfd(0, EventfdFlags::CLOEXEC).expect("eventfd");
        let stop_wait = stop.try_clone().expect("dup eventfd");
        let gate = Arc::new(Gate::default());
        let opens = gate.clone();
        let handle = std::thread::Builder::new()
            .name("control".into())
            .spawn(move || {
                loop {
                    let mut fds = [PollFd::new(&stop_wait, PollFlags::IN), PollFd::new(&channel, PollFlags::IN)];
                    if poll(&mut fds, None).is_err() {
                        continue;
                    }
                    if !fds[0].revents().is_empty() {
                        return;
                    }
                    let mut msg = [0u8; 2];
                    match rustix::io::read(&channel, &mut msg) {
                        Ok(2) => {}
                        Ok(_) | Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => continue,
                        Err(_) => {
                            // Nothing can start the program any more.
                            opens.open(false);
                            return;
                        }
                    }
                    match Message::decode(msg) {
                        Some(Message::Start) => opens.open(true),
                        Some(Message::Signal { signal, all }) => send(&kernel, uid, u32::from(signal), all),
                        None => tracing::debug!("control channel: unknown message {msg:?}"),
                    }
                }
            })
            .expect("spawn the control thread");
        Controller { stop, gate, handle }
    }

    /// What the first process waits on before its program runs.
    pub fn start_gate(&self) -> StartGate {
        StartGate(self.gate.clone())
    }

    /// Stops the thread; a first process still waiting learns it will not
    /// run.
    pub fn stop(self) {
        self.gate.open(false);
        let _ = rustix::io::write(&self.stop, &1u64.to_ne_bytes());
        let _ = self.handle.join();
    }
}

/// Sends `signal` to the first process, or with `all` to every process.
fn send(kernel: &Kernel, uid: u32, signal: u32, all: bool) {
    if signal == 0 || signal > crate::signal::NSIG as u32 {
        return;
    }
    let targets = {
        let procs = kernel.procs.lock().unwrap();
        if all { procs.processes() } else { procs.group(INIT_PID).into_iter().collect() }
    };
    for tg in targets {
        crate::task::send_to_group(kernel, &tg, SigInfo::user(signal, code::SI_USER, 0, uid));
    }
}
