//! The line discipline (Linux's n_tty): what happens to bytes between a
//! terminal's two sides. Input (what the master writes) is translated
//! (ICRNL, INLCR, IGNCR), may raise signals (ISIG), is edited a line at a
//! time (ICANON: erase, kill, word erase, literal next, EOF) and echoed;
//! output (what the slave writes, and echoes) is translated (OPOST, ONLCR,
//! OCRNL, ONOCR, ONLRET, tab expansion).
//!
//! Pure bookkeeping: no locking, blocking or signal sending here. Callers
//! feed bytes in and act on what comes back.

use std::collections::VecDeque;

use linux_raw_sys::general as g;

/// Bytes the input side holds at most (Linux's N_TTY_BUF_SIZE): a raw
/// writer waits for room; a canonical line longer than this keeps only
/// its end-of-line.
pub const INPUT_LIMIT: usize = 4096;

/// A terminal's settings, as `struct termios2` holds them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Termios {
    pub iflag: u32,
    pub oflag: u32,
    pub cflag: u32,
    pub lflag: u32,
    pub line: u8,
    pub cc: [u8; 19],
    pub ispeed: u32,
    pub ospeed: u32,
}

impl Termios {
    /// A new pty slave's settings (Linux's tty_std_termios for devpts).
    pub fn pty_slave() -> Termios {
        let mut cc = [0u8; 19];
        let set: [(u32, u8); 14] = [
            (g::VINTR, 0o3),
            (g::VQUIT, 0o34),
            (g::VERASE, 0o177),
            (g::VKILL, 0o25),
            (g::VEOF, 0o4),
            (g::VTIME, 0),
            (g::VMIN, 1),
            (g::VSTART, 0o21),
            (g::VSTOP, 0o23),
            (g::VSUSP, 0o32),
            (g::VREPRINT, 0o22),
            (g::VDISCARD, 0o17),
            (g::VWERASE, 0o27),
            (g::VLNEXT, 0o26),
        ];
        for (i, v) in set {
            cc[i as usize] = v;
        }
        Termios {
            iflag: g::ICRNL | g::IXON,
            oflag: g::OPOST | g::ONLCR,
            cflag: g::B38400 | g::CS8 | g::CREAD,
            lflag: g::ISIG | g::ICANON | g::ECHO | g::ECHOE | g::ECHOK | g::ECHOCTL | g::ECHOKE | g::IEXTEN,
            line: 0,
            cc,
            ispeed: 38400,
            ospeed: 38400,
        }
    }

    pub fn to_abi(self) -> g::termios {
        let mut t = <g::termios as crate::abi::Pod>::zeroed();
        t.c_iflag = self.iflag;
        t.c_oflag = self.oflag;
        t.c_cflag = self.cflag;
        t.c_lflag = self.lflag;
        t.c_line = self.line;
        t.c_cc = self.cc;
        t
    }

    pub fn to_abi2(self) -> g::termios2 {
        let mut t = <g::termios2 as crate::abi::Pod>::zeroed();
        t.c_iflag = self.iflag;
        t.c_oflag = self.oflag;
        t.c_cflag = self.cflag;
        t.c_lflag = self.lflag;
        t.c_line = self.line;
        t.c_cc = self.cc;
        t.c_ispeed = self.ispeed;
        t.c_ospeed = self.ospeed;
        t
    }

    /// From `struct termios` (TCSETS): the speeds follow the baud bits.
    pub fn from_abi(t: &g::termios, old: &Termios) -> Termios {
        let speed = baud_rate(t.c_cflag & g::CBAUD).unwrap_or(old.ospeed);
        Termios {
            iflag: t.c_iflag,
            oflag: t.c_oflag,
            cflag: t.c_cflag,
            lflag: t.c_lflag,
            line: t.c_line,
            cc: t.c_cc,
            ispeed: speed,
            ospeed: speed,
        }
    }

    /// From `struct termios2` (TCSETS2).
    pub fn from_abi2(t: &g::termios2) -> Termios {
        Termios {
            iflag: t.c_iflag,
            oflag: t.c_oflag,
            cflag: t.c_cflag,
            lflag: t.c_lflag,
            line: t.c_line,
            cc: t.c_cc,
            ispeed: t.c_ispeed,
            ospeed: t.c_ospeed,
        }
    }

    fn l(&self, flag: u32) -> bool {
        self.lflag & flag != 0
    }

    fn i(&self, flag: u32) -> bool {
        self.iflag & flag != 0
    }

    fn o(&self, flag: u32) -> bool {
        self.oflag & flag != 0
    }

    /// Control character `index`, None when disabled (0).
    fn cc(&self, index: u32) -> Option<u8> {
        Some(self.cc[index as usize]).filter(|c| *c != 0)
    }

    /// True if `c` is control character `index` (and that is enabled).
    fn is(&self, c: u8, index: u32) -> bool {
        self.cc(index) == Some(c)
    }

    pub fn canonical(&self) -> bool {
        self.l(g::ICANON)
    }

    pub fn vmin(&self) -> u8 {
        self.cc[g::VMIN as usize]
    }

    pub fn vtime(&self) -> u8 {
        self.cc[g::VTIME as usize]
    }

    /// TOSTOP: background writers get SIGTTOU.
    pub fn tostop(&self) -> bool {
        self.l(g::TOSTOP)
    }
}

/// The bits/second of a CBAUD value.
fn baud_rate(bits: u32) -> Option<u32> {
    const RATES: [u32; 16] = [0, 50, 75, 110, 134, 150, 200, 300, 600, 1200, 1800, 2400, 4800, 9600, 19200, 38400];
    const HIGH: [u32; 15] = [
        57600, 115200, 230400, 460800, 500000, 576000, 921600, 1000000, 1152000, 1500000, 2000000, 2500000, 3000000,
        3500000, 4000000,
    ];
    if bits & g::CBAUDEX == 0 {
        RATES.get(bits as usize).copied()
    } else {
        HIGH.get((bits & !g::CBAUDEX) as usize - 1).copied()
    }
}

/// What receiving input asks of the caller beyond storing it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Received {
    /// Signals for the foreground process group, in order.
    pub signals: Vec<u32>,
    /// Bytes of input taken (the rest waits for room).
    pub taken: usize,
}

/// Which kind of erase.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Erase {
    Char,
    Word,
    Line,
}

fn is_cntrl(c: u8) -> bool {
    c < 0x20 || c == 0x7f
}

/// One side's line discipline: the settings, the input waiting to be
/// read, the line being edited, and the output waiting for the other side.
pub struct LineDiscipline {
    pub termios: Termios,
    /// Input ready for reading: whole lines in canonical mode, every byte
    /// in raw mode.
    ready: VecDeque<u8>,
    /// In canonical mode, the length of each line in `ready`, oldest first
    /// (what is left of it, once a read took part); a line ended by EOF
    /// does not hold the EOF character and may be empty.
    lines: VecDeque<usize>,
    /// The line being edited (canonical mode).
    edit: Vec<u8>,
    /// The output column where the line being edited started, for erasing
    /// tabs.
    edit_column: u32,
    /// The next character is taken literally (after VLNEXT).
    literal_next: bool,
    /// Output stopped by VSTOP (IXON) until VSTART.
    pub stopped: bool,
    /// Output for the other side (what the master reads).
    pub output: VecDeque<u8>,
    /// Echoes of the input being received, kept apart until the whole
    /// write is taken, so that a signal character's flush drops them too,
    /// as Linux drops uncommitted echoes.
    pending_echo: Vec<u8>,
    /// The output column (for tabs and erases), as Linux tracks it.
    column: u32,
}

impl LineDiscipline {
    pub fn new(termios: Termios) -> LineDiscipline {
        LineDiscipline {
            termios,
            ready: VecDeque::new(),
            lines: VecDeque::new(),
            edit: Vec::new(),
            edit_column: 0,
            literal_next: false,
            stopped: false,
            output: VecDeque::new(),
            pending_echo: Vec::new(),
            column: 0,
        }
    }

    /// Changes the settings. Leaving canonical mode makes the line being
    /// edited readable; entering it makes what is readable one line.
    pub fn set_termios(&mut self, t: Termios) {
        let was = self.termios.canonical();
        self.termios = t;
        if was && !t.canonical() {
            self.ready.extend(self.edit.drain(..));
            self.lines.clear();
        } else if !was && t.canonical() && !self.ready.is_empty() {
            self.lines.clear();
            self.lines.push_back(self.ready.len());
        }
        if !t.i(g::IXON) {
            self.stopped = false;
        }
    }

    /// Bytes a read could take now: in canonical mode only whole lines.
    pub fn readable(&self) -> usize {
        self.ready.len()
    }

    /// True if a read would return now: data, or (canonical) an EOF line.
    pub fn read_ready(&self) -> bool {
        if self.termios.canonical() { !self.lines.is_empty() } else { !self.ready.is_empty() }
    }

    /// Room left for input.
    fn room(&self) -> usize {
        INPUT_LIMIT.saturating_sub(self.ready.len() + self.edit.len())
    }

    /// True if a writer of input could put at least a byte in now.
    pub fn input_room(&self) -> bool {
        self.room() > 0 || self.termios.canonical()
    }

    /// Discards input not yet read (TCIFLUSH, a signal character).
    pub fn flush_input(&mut self) {
        self.ready.clear();
        self.lines.clear();
        self.edit.clear();
        self.literal_next = false;
        self.pending_echo.clear();
    }

    /// Takes input for a read, at most `max` bytes: in canonical mode from
    /// one line only. A read of an EOF line gives nothing and consumes it.
    pub fn take_input(&mut self, max: usize) -> Vec<u8> {
        if self.termios.canonical() {
            let Some(len) = self.lines.front_mut() else { return Vec::new() };
            let n = (*len).min(max);
            *len -= n;
            if *len == 0 {
                self.lines.pop_front();
            }
            self.ready.drain(..n).collect()
        } else {
            let n = self.ready.len().min(max);
            self.ready.drain(..n).collect()
        }
    }

    /// Receives input bytes (a write on the master). Stops early in raw
    /// mode when there is no room; `taken` says how far it got.
    pub fn receive(&mut self, input: &[u8]) -> Received {
        let mut r = Received::default();
        for &c in input {
            if !self.termios.canonical() && self.room() == 0 {
                break;
            }
            self.receive_byte(c, &mut r);
            r.taken += 1;
        }
        let echo = std::mem::take(&mut self.pending_echo);
        for c in echo {
            self.put_output(c);
        }
        r
    }

    fn receive_byte(&mut self, mut c: u8, r: &mut Received) {
        let t = self.termios;
        if t.i(g::ISTRIP) {
            c &= 0x7f;
        }
        if self.literal_next {
            self.literal_next = false;
            if t.l(g::ECHO) && t.l(g::ECHOCTL) {
                // Over the "^\b" shown for VLNEXT.
                self.echo_char(c);
            } else if t.l(g::ECHO) {
                self.echo_char(c);
            }
            self.store(c);
            return;
        }
        if t.i(g::IXON) {
            if t.is(c, g::VSTART) {
                self.stopped = false;
                return;
            }
            if t.is(c, g::VSTOP) {
                self.stopped = true;
                return;
            }
            if self.stopped && t.i(g::IXANY) {
                self.stopped = false;
            }
        }
        if t.l(g::ISIG) {
            let sig = if t.is(c, g::VINTR) {
                Some(g::SIGINT)
            } else if t.is(c, g::VQUIT) {
                Some(g::SIGQUIT)
            } else if t.is(c, g::VSUSP) {
                Some(g::SIGTSTP)
            } else {
                None
            };
            if let Some(sig) = sig {
                if !t.l(g::NOFLSH) {
                    self.flush_input();
                }
                r.signals.push(sig);
                if t.i(g::IXON) {
                    self.stopped = false;
                }
                if t.l(g::ECHO) {
                    self.echo_char(c);
                }
                return;
            }
        }
        if c == b'\r' {
            if t.i(g::IGNCR) {
                return;
            }
            if t.i(g::ICRNL) {
                c = b'\n';
            }
        } else if c == b'\n' && t.i(g::INLCR) {
            c = b'\r';
        }
        if t.canonical() {
            if t.is(c, g::VERASE) {
                self.erase(Erase::Char, c);
                return;
            }
            if t.is(c, g::VKILL) {
                self.erase(Erase::Line, c);
                return;
            }
            if t.l(g::IEXTEN) && t.is(c, g::VWERASE) {
                self.erase(Erase::Word, c);
                return;
            }
            if t.l(g::IEXTEN) && t.is(c, g::VLNEXT) {
                self.literal_next = true;
                if t.l(g::ECHO) && t.l(g::ECHOCTL) {
                    self.pending_echo.extend_from_slice(b"^\x08");
                }
                return;
            }
            if t.l(g::IEXTEN) && t.l(g::ECHO) && t.is(c, g::VREPRINT) {
                self.echo_char(c);
                self.pending_echo.push(b'\n');
                let line = self.edit.clone();
                for b in line {
                    self.echo_char(b);
                }
                return;
            }
            if c == b'\n' {
                if t.l(g::ECHO) || t.l(g::ECHONL) {
                    self.pending_echo.push(b'\n');
                }
                self.edit.push(c);
                self.end_line();
                return;
            }
            if t.is(c, g::VEOF) {
                self.end_line();
                return;
            }
            if t.is(c, g::VEOL) || t.is(c, g::VEOL2) {
                if t.l(g::ECHO) {
                    self.echo_char(c);
                }
                self.edit.push(c);
                self.end_line();
                return;
            }
        }
        if t.l(g::ECHO) {
            if t.canonical() && self.edit.is_empty() {
                self.edit_column = self.column_after_pending();
            }
            self.echo_char(c);
        } else if c == b'\n' && t.l(g::ECHONL) {
            self.pending_echo.push(b'\n');
        }
        self.store(c);
    }

    /// Keeps an input byte: in the line being edited, or readable at once.
    fn store(&mut self, c: u8) {
        if self.termios.canonical() {
            // A full line keeps room only for its end.
            if self.room() > 1 {
                self.edit.push(c);
            }
        } else {
            self.ready.push_back(c);
        }
    }

    /// The edited line becomes readable.
    fn end_line(&mut self) {
        let n = self.edit.len();
        self.ready.extend(self.edit.drain(..));
        self.lines.push_back(n);
    }

    /// Echoes `c`: control characters as `^X` under ECHOCTL (but tab and
    /// newline).
    fn echo_char(&mut self, c: u8) {
        if self.termios.l(g::ECHOCTL) && is_cntrl(c) && c != b'\t' && c != b'\n' {
            self.pending_echo.push(b'^');
            self.pending_echo.push(c ^ 0x40);
        } else {
            self.pending_echo.push(c);
        }
    }

    /// The output column once the pending echoes are out.
    fn column_after_pending(&self) -> u32 {
        let mut col = self.column;
        for &c in &self.pending_echo {
            col = self.advance_column(col, c);
        }
        col
    }

    fn advance_column(&self, col: u32, c: u8) -> u32 {
        match c {
            b'\n' | b'\r' => 0,
            b'\t' => (col | 7) + 1,
            8 => col.saturating_sub(1),
            c if is_cntrl(c) => col,
            c if self.termios.i(g::IUTF8) && c & 0xc0 == 0x80 => col,
            _ => col + 1,
        }
    }

    /// Erases a character, word or the whole line being edited, and its
    /// echo, as Linux's eraser does.
    fn erase(&mut self, kind: Erase, c: u8) {
        let t = self.termios;
        if self.edit.is_empty() {
            return;
        }
        if kind == Erase::Line {
            if !t.l(g::ECHO) {
                self.edit.clear();
                return;
            }
            if !t.l(g::ECHOK) || !t.l(g::ECHOKE) || !t.l(g::ECHOE) {
                self.edit.clear();
                self.echo_char(c);
                if t.l(g::ECHOK) {
                    self.pending_echo.push(b'\n');
                }
                return;
            }
        }
        let mut seen_alnum = false;
        while let Some(&last) = self.edit.last() {
            // A whole UTF-8 character at once.
            let mut start = self.edit.len() - 1;
            if t.i(g::IUTF8) {
                while start > 0 && self.edit[start] & 0xc0 == 0x80 {
                    start -= 1;
                }
            }
            let ch = self.edit[start];
            if kind == Erase::Word {
                if ch.is_ascii_alphanumeric() || ch == b'_' {
                    seen_alnum = true;
                } else if seen_alnum {
                    break;
                }
            }
            self.edit.truncate(start);
            if t.l(g::ECHO) {
                if kind == Erase::Char && !t.l(g::ECHOE) {
                    self.echo_char(c);
                } else if last == b'\t' || ch == b'\t' {
                    // Back to where the tab started.
                    let mut col = self.edit_column;
                    for &b in &self.edit {
                        col = if b == b'\t' {
                            (col | 7) + 1
                        } else if is_cntrl(b) {
                            col + if t.l(g::ECHOCTL) { 2 } else { 0 }
                        } else {
                            self.advance_column(col, b)
                        };
                    }
                    let width = ((col | 7) + 1) - col;
                    for _ in 0..width {
                        self.pending_echo.push(8);
                    }
                } else {
                    if is_cntrl(ch) && t.l(g::ECHOCTL) {
                        self.pending_echo.extend_from_slice(b"\x08 \x08");
                    }
                    if !is_cntrl(ch) || t.l(g::ECHOCTL) {
                        self.pending_echo.extend_from_slice(b"\x08 \x08");
                    }
                }
            }
            if kind == Erase::Char {
                break;
            }
        }
    }

    /// Output from the slave's side (a write, or an echo), translated.
    pub fn put_output(&mut self, c: u8) {
        let t = self.termios;
        if !t.o(g::OPOST) {
            self.output.push_back(c);
            return;
        }
        match c {
            b'\n' => {
                if t.o(g::ONLCR) {
                    self.output.push_back(b'\r');
                    self.column = 0;
                } else if t.o(g::ONLRET) {
                    self.column = 0;
                }
                self.output.push_back(b'\n');
            }
            b'\r' => {
                if t.o(g::ONOCR) && self.column == 0 {
                    return;
                }
                if t.o(g::OCRNL) {
                    if t.o(g::ONLRET) {
                        self.column = 0;
                    }
                    self.output.push_back(b'\n');
                    return;
                }
                self.column = 0;
                self.output.push_back(b'\r');
            }
            b'\t' => {
                let next = (self.column | 7) + 1;
                if t.oflag & g::TABDLY == g::XTABS {
                    for _ in self.column..next {
                        self.output.push_back(b' ');
                    }
                } else {
                    self.output.push_back(b'\t');
                }
                self.column = next;
            }
            _ => {
                self.column = self.advance_column(self.column, c);
                self.output.push_back(c);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echo_of(ld: &mut LineDiscipline, input: &[u8]) -> Vec<u8> {
        ld.receive(input);
        ld.output.drain(..).collect()
    }

    #[test]
    fn canonical_lines_are_edited_and_echoed() {
        let mut ld = LineDiscipline::new(Termios::pty_slave());
        assert_eq!(echo_of(&mut ld, b"abc\x7fd\n"), b"abc\x08 \x08d\r\n");
        assert_eq!(ld.take_input(100), b"abd\n");
        assert_eq!(echo_of(&mut ld, b"xy\tz\x7f\x7f"), b"xy\tz\x08 \x08\x08\x08\x08\x08\x08\x08");
    }

    #[test]
    fn signal_characters_flush_input_and_its_echo() {
        let mut ld = LineDiscipline::new(Termios::pty_slave());
        let r = ld.receive(b"abc\x03");
        assert_eq!(r.signals, vec![g::SIGINT]);
        assert_eq!(ld.output.drain(..).collect::<Vec<_>>(), b"^C");
        assert!(!ld.read_ready());
    }

    #[test]
    fn raw_input_waits_for_room() {
        let mut t = Termios::pty_slave();
        t.lflag &= !(g::ICANON | g::ECHO);
        let mut ld = LineDiscipline::new(t);
        let r = ld.receive(&vec![b'x'; INPUT_LIMIT + 10]);
        assert_eq!(r.taken, INPUT_LIMIT);
        assert_eq!(ld.take_input(10).len(), 10);
        assert_eq!(ld.receive(b"0123456789abc").taken, 10);
    }
}
