//! Rewriting system call sites so that their next call skips the trap.
//!
//! After a `mov $nr, %eax; syscall` traps, the site is patched to jump
//! through a slot of a trampoline table into a cell that hands the call to
//! the platform's trampoline (the byte contract is
//! [`platform::arch::rewrite`]). The table and cells live in a mapping the
//! sentry adds at a fixed low address the first time a site is patched,
//! hidden from the application: /proc does not show it, and unmapping or
//! protecting over it leaves it alone.
//!
//! What is patched, and what is not:
//! - only the exact seven bytes with the number the call was made with, so
//!   the patch never splits another instruction the call did not just run;
//! - only in private mappings that are executable and not writable: a
//!   shared file mapping would carry the patch into the file, and code the
//!   application may write (JIT buffers) is its own business. The page gets
//!   a frame of its own first, as a write would give it, so the file and
//!   other processes never see the patch;
//! - when the application makes a patched page writable, its sites get
//!   their original bytes back, so what it reads or writes there is its own.
//!
//! Other threads may run the site meanwhile. The bytes change one at a
//! time, first to `int3`, so that a thread arriving then traps and is put
//! back to try again; a thread that had run the old `mov` and resumes at
//! the old `syscall` finds the invalid opcode `06` there and is taken as
//! having made the call. The sentry changes the bytes only under the
//! address space's lock, which its handling of those traps also takes.

use std::collections::BTreeMap;

use std::sync::atomic::{AtomicU64, Ordering};

use memory::Frame;
use platform::arch::rewrite::{self, SITE_LEN};
use platform::{Access, FAST_PATH_CONSTANTS, FAST_PATH_SYSCALLS, Trampoline};

use super::{Backing, MemoryManager, PAGE, Role, State, Vma, page_down};

/// What the sentry knows of a system call site.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Site {
    /// Jumps through this slot of the table.
    Patched { index: u64 },
    /// Looked at once and left alone.
    Refused,
    /// Patched once, then given its bytes back.
    Restored,
}

/// The rewriting state of an address space.
#[derive(Clone, Default)]
pub(super) struct Rewrites {
    /// Sites by address.
    sites: BTreeMap<u64, Site>,
    /// Slots handed out; never reused.
    used: u64,
    /// The table's mapping exists.
    mapped: bool,
    /// The table's addresses were taken by the application: no rewriting.
    blocked: bool,
    /// What the answers page holds, once written.
    answers: Option<(bool, [u64; FAST_PATH_CONSTANTS])>,
    /// The process that published answers here first, and whether another
    /// has since (CLONE_VM without a thread, as vfork): the page, one per
    /// address space, then answers for nobody.
    publisher: Option<i32>,
    several_processes: bool,
}

/// Most sites looked at per address space: beyond this every call traps,
/// which is correct, and the records stay small.
const MAX_SITES: usize = 1 << 16;

/// What became of a system call's site.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rewrite {
    /// Rewritten now.
    NewlyPatched,
    /// Rewritten before (the call may have trapped on its way there all
    /// the same: a thread that had started the old instructions).
    Patched,
    /// Left as it is.
    Kept,
}

/// What a trap at a rewritten site means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SiteTrap {
    /// The system call the site made: the registers hold it and rip is
    /// past it.
    Syscall,
    /// The site was changing under the thread: run it again from rip.
    Retry,
}

impl Rewrites {
    /// The state a forked copy starts with: the same sites and table, its
    /// answers yet to be published.
    pub(super) fn forked(&self) -> Rewrites {
        Rewrites { answers: None, publisher: None, several_processes: false, ..self.clone() }
    }

    /// The VMAs the table takes.
    pub(super) fn vmas(&self) -> usize {
        if self.mapped { 3 } else { 0 }
    }

    /// True if `[start, end)` enters the table's mapping.
    pub(super) fn overlaps(&self, start: u64, end: u64) -> bool {
        self.mapped && start < rewrite::END && end > rewrite::TABLE
    }

    /// The parts of `[start, end)` outside the table's mapping.
    pub(super) fn outside(&self, start: u64, end: u64) -> Vec<(u64, u64)> {
        if !self.overlaps(start, end) {
            return vec![(start, end)];
        }
        [(start, end.min(rewrite::TABLE)), (start.max(rewrite::END), end)].into_iter().filter(|(s, e)| s < e).collect()
    }
}

impl MemoryManager {
    /// Counts of rewritten sites, for `--profile`.
    pub fn rewritten_sites(&self) -> u64 {
        self.lock().rewrites.sites.values().filter(|s| matches!(s, Site::Patched { .. })).count() as u64
    }

    /// After a system call `nr` reached the sentry with rip = `ret`:
    /// patches the site before `ret` to go to the trampoline at `entry`
    /// from now on, if it is one that may be.
    pub fn rewrite_site(&self, ret: u64, nr: u64, trampoline: &Trampoline) -> Rewrite {
        let Some(site) = ret.checked_sub(SITE_LEN as u64) else { return Rewrite::Kept };
        if !trampoline.rewrites(nr) {
            return Rewrite::Kept;
        }
        let mut st = self.lock();
        match st.rewrites.sites.get(&site) {
            Some(Site::Patched { .. }) => return Rewrite::Patched,
            Some(_) => return Rewrite::Kept,
            None if st.rewrites.blocked || st.rewrites.sites.len() >= MAX_SITES => return Rewrite::Kept,
            None => {}
        }
        let patched = self.patch_locked(&mut st, site, nr, trampoline);
        let record = match patched {
            Some(index) => Site::Patched { index },
            None => Site::Refused,
        };
        st.rewrites.sites.insert(site, record);
        if patched.is_some() { Rewrite::NewlyPatched } else { Rewrite::Kept }
    }

    fn patch_locked(&self, st: &mut State, site: u64, nr: u64, trampoline: &Trampoline) -> Option<u64> {
        // The whole site in one page of one mapping the application may
        // run but not write, and that is its own.
        let page = page_down(site);
        if page_down(site + SITE_LEN as u64 - 1) != page {
            return None;
        }
        let vma = st.vmas.find(site)?.clone();
        let own = matches!(vma.backing, Backing::Anonymous | Backing::File { shared: false, .. });
        if !own || vma.role != Role::Plain || !vma.access.execute || vma.access.write {
            return None;
        }
        let old = self.read_site(st, site)?;
        if !rewrite::is_site(&old, nr) || st.rewrites.used >= rewrite::SLOTS {
            return None;
        }
        if !st.rewrites.mapped {
            if !st.vmas.is_free(rewrite::TABLE, rewrite::END) {
                st.rewrites.blocked = true;
                return None;
            }
            self.charge_records(st, 0, 3).ok()?;
            // The answers page takes the counts the trampoline adds: it is
            // the application's to write, as any of its own memory.
            for (start, end, access) in [
                (rewrite::TABLE, rewrite::ANSWERS, Access::READ_EXECUTE),
                (rewrite::ANSWERS, rewrite::CODE, Access::READ_WRITE),
                (rewrite::CODE, rewrite::END, Access::READ_EXECUTE),
            ] {
                let mut vma = Vma::new(start, end, access, Backing::Anonymous);
                vma.role = Role::Trampolines;
                vma.max_access = access;
                st.vmas.insert(vma);
            }
            st.rewrites.mapped = true;
            if let Some(code) = trampoline.code {
                let vma = st.vmas.find(rewrite::CODE)?.clone();
                let f = self.own_frame(st, &vma, rewrite::CODE)?;
                self.mf.write(f, 0, code);
            }
        }
        let index = st.rewrites.used;
        let cell = rewrite::cell_bytes(nr as u32, site + SITE_LEN as u64, trampoline.entry);
        let table = st.vmas.find(rewrite::TABLE)?.clone();
        let cell_frame = self.own_frame(st, &table, rewrite::cell(index))?;
        let slot_frame = self.own_frame(st, &table, rewrite::slot(index))?;
        let site_frame = self.own_frame(st, &vma, page)?;
        st.rewrites.used += 1;
        self.mf.write(cell_frame, (rewrite::cell(index) % PAGE) as usize, &cell);
        self.mf.write(slot_frame, (rewrite::slot(index) % PAGE) as usize, &rewrite::cell(index).to_le_bytes());
        self.write_site(site_frame, site, &rewrite::patched_site(index));
        Some(index)
    }

    /// Keeps the answers page of a platform whose trampoline reads it
    /// ([`Trampoline::answers_in_table`]) equal to `answers`, the fast-path
    /// answers of process `tgid` (`None`: answer none), and returns the
    /// calls it answered since the last look, by fast-path index.
    pub fn publish_answers(
        &self,
        tgid: i32,
        answers: Option<[u64; FAST_PATH_CONSTANTS]>,
    ) -> [u64; FAST_PATH_SYSCALLS.len()] {
        let mut hits = [0; FAST_PATH_SYSCALLS.len()];
        let mut st = self.lock();
        if !st.rewrites.mapped {
            return hits;
        }
        match st.rewrites.publisher {
            None => st.rewrites.publisher = Some(tgid),
            Some(p) if p != tgid => st.rewrites.several_processes = true,
            Some(_) => {}
        }
        let want = (answers.is_some() && !st.rewrites.several_processes, answers.unwrap_or_default());
        let Some(table) = st.vmas.find(rewrite::ANSWERS).cloned() else { return hits };
        if st.rewrites.answers != Some(want) {
            let Some(f) = self.own_frame(&mut st, &table, rewrite::ANSWERS) else { return hits };
            // Off while the values change, so no call reads half of them.
            self.mf.write(f, rewrite::ANSWERS_ON as usize, &0u32.to_le_bytes());
            for (i, v) in want.1.iter().enumerate() {
                self.mf.write(f, (rewrite::ANSWERS_VALUES + 8 * i as u64) as usize, &v.to_le_bytes());
            }
            self.mf.write(f, rewrite::ANSWERS_ON as usize, &u32::from(want.0).to_le_bytes());
            st.rewrites.answers = Some(want);
        }
        let Some(p) = st.pages.get(&rewrite::ANSWERS).copied().filter(|p| !p.cow) else { return hits };
        let base = self.mf.frame_ptr(p.frame);
        for (i, h) in hits.iter_mut().enumerate() {
            // SAFETY: an aligned u64 inside a frame this address space
            // holds; the application's trampoline adds to it with locked
            // instructions, so both sides use atomics.
            let count =
                unsafe { AtomicU64::from_ptr(base.add((rewrite::ANSWERS_HITS + 8 * i as u64) as usize).cast()) };
            *h = count.swap(0, Ordering::AcqRel);
        }
        hits
    }

    /// The seven bytes at `site`, if its page is present.
    fn read_site(&self, st: &State, site: u64) -> Option<[u8; SITE_LEN]> {
        if page_down(site + SITE_LEN as u64 - 1) != page_down(site) {
            return None;
        }
        let p = st.pages.get(&page_down(site))?;
        let mut b = [0u8; SITE_LEN];
        self.mf.read(p.frame, (site % PAGE) as usize, &mut b);
        Some(b)
    }

    /// The frame behind `va`'s page in `vma`, made this address space's
    /// alone (copied from a file's or a fork's), as a write would make it.
    fn own_frame(&self, st: &mut State, vma: &Vma, va: u64) -> Option<Frame> {
        let page = page_down(va);
        self.populate_vma(st, vma, page, page + PAGE, Some((page, page + PAGE)), Some(page)).ok()?;
        st.pages.get(&page).filter(|p| !p.cow).map(|p| p.frame)
    }

    /// Changes the site's bytes to `new` one at a time, in an order that
    /// shows a thread running them only the old instructions, `int3` at
    /// the start, or `06` where the old `syscall` was.
    fn write_site(&self, frame: Frame, site: u64, new: &[u8; SITE_LEN]) {
        let off = (site % PAGE) as usize;
        let put = |i: usize, b: u8| self.mf.write(frame, off + i, &[b]);
        put(0, 0xcc);
        for i in [5, 6, 1, 2, 3, 4] {
            put(i, new[i]);
        }
        put(0, new[0]);
    }

    /// Puts back the original bytes of the sites in `[start, end)` and
    /// forgets them: the application may write there now.
    pub(super) fn restore_sites(&self, st: &mut State, start: u64, end: u64) {
        let sites: Vec<(u64, u64)> = st
            .rewrites
            .sites
            .range(start.saturating_sub(SITE_LEN as u64 - 1)..end)
            .filter_map(|(&a, s)| match s {
                Site::Patched { index } => Some((a, *index)),
                _ => None,
            })
            .collect();
        for (site, index) in sites {
            st.rewrites.sites.insert(site, Site::Restored);
            let Some(cell_page) = st.pages.get(&page_down(rewrite::cell(index))).copied() else { continue };
            let mut nr = [0u8; 4];
            self.mf.read(cell_page.frame, (rewrite::cell(index) % PAGE + rewrite::CELL_NR) as usize, &mut nr);
            if self.read_site(st, site) != Some(rewrite::patched_site(index)) {
                continue;
            }
            let Some(p) = st.pages.get(&page_down(site)).copied() else { continue };
            if p.cow {
                continue;
            }
            let old = [0xb8, nr[0], nr[1], nr[2], nr[3], 0x0f, 0x05];
            // 06 00 -> 0f 05 byte by byte passes through 06 05 (invalid:
            // the trap finds the call restored and retries), never 0f 00.
            let off = (site % PAGE) as usize;
            self.mf.write(p.frame, off, &[0xcc]);
            for i in [1, 2, 3, 4, 6, 5, 0] {
                self.mf.write(p.frame, off + i, &old[i..i + 1]);
            }
        }
    }

    /// Gives every patched site its bytes back and patches no more: a
    /// traced process's code reads as the program has it, and each of its
    /// calls reaches the sentry for the tracer to see.
    pub fn stop_rewriting(&self) {
        let mut st = self.lock();
        st.rewrites.blocked = true;
        let patched: Vec<u64> =
            st.rewrites.sites.iter().filter(|(_, s)| matches!(s, Site::Patched { .. })).map(|(a, _)| *a).collect();
        for site in patched {
            // A page shared copy-on-write (with a fork) gets a frame of its
            // own first, as restoring needs.
            if let Some(vma) = st.vmas.find(site).cloned() {
                let _ = self.own_frame(&mut st, &vma, site);
            }
            self.restore_sites(&mut st, site, site + 1);
        }
        drop(st);
        self.space.flush();
    }

    /// Forgets the sites in `[start, end)`, which are going away.
    pub(super) fn forget_sites(st: &mut State, start: u64, end: u64) {
        let gone: Vec<u64> =
            st.rewrites.sites.range(start.saturating_sub(SITE_LEN as u64 - 1)..end).map(|(&a, _)| a).collect();
        for a in gone {
            st.rewrites.sites.remove(&a);
        }
    }

    /// A trap at `rip` that rewriting may explain: an invalid opcode where
    /// a patched site's `06 00` now stands (the old `syscall`, reached
    /// after the patch), or a breakpoint from the `int3` a site showed
    /// while it changed. `None` for a trap of the application's own.
    pub fn site_trap(&self, breakpoint: bool, rip: u64) -> Option<SiteTrap> {
        let st = self.lock();
        if !st.rewrites.mapped {
            return None;
        }
        let site = rip.checked_sub(if breakpoint { 1 } else { SITE_LEN as u64 - 2 })?;
        let known = matches!(st.rewrites.sites.get(&site), Some(Site::Patched { .. } | Site::Restored));
        let now = self.read_site(&st, site)?;
        if breakpoint {
            return (known && now[0] != 0xcc).then_some(SiteTrap::Retry);
        }
        if rewrite::patched_index(&now).is_some_and(|i| i < st.rewrites.used) {
            return Some(SiteTrap::Syscall);
        }
        // Put back under it (see restore_sites): the call is there again.
        (known && now[5..] == [0x0f, 0x05]).then_some(SiteTrap::Retry)
    }
}
