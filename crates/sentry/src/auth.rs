//! A process's credentials and the rules for changing them.
//!
//! The sandbox starts with the caller's ids, captured once at start-up, and
//! the capabilities a container runtime grants: root of the sandbox holds
//! [`CONTAINER_DEFAULT`] (or what `--cap-add`/`--cap-drop` make of it),
//! whatever the host's process holds. Capabilities then follow Linux's
//! rules for a process without user namespaces: leaving uid 0 drops them
//! unless the securebits say otherwise, execve computes them as
//! cap_bprm_creds_from_file(), and every permission check asks the calling
//! process's credentials, never the host. A process with
//! CAP_SETUID may take any identity; any other may only move between the
//! ids it already holds (setuid(2), setreuid(2), setresuid(2) and their
//! group forms).

use crate::errno::Errno;

/// "Leave this id as it is" in the set*id calls.
const KEEP: u32 = u32::MAX;

/// Real, effective, saved and file-system ids of one kind (user or group).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ids {
    pub real: u32,
    pub effective: u32,
    pub saved: u32,
    pub fs: u32,
}

impl Ids {
    pub fn all(id: u32) -> Ids {
        Ids { real: id, effective: id, saved: id, fs: id }
    }

    fn holds(&self, id: u32) -> bool {
        id == self.real || id == self.effective || id == self.saved
    }

    /// setuid(2): privileged, every id; otherwise the effective one, to the
    /// real or saved id.
    pub fn set(&mut self, id: u32, privileged: bool) -> Result<(), Errno> {
        if privileged {
            *self = Ids::all(id);
        } else if id == self.real || id == self.saved {
            self.effective = id;
            self.fs = id;
        } else {
            return Err(Errno::EPERM);
        }
        Ok(())
    }

    /// setreuid(2).
    pub fn set_re(&mut self, real: u32, effective: u32, privileged: bool) -> Result<(), Errno> {
        if !privileged
            && ((real != KEEP && real != self.real && real != self.effective)
                || (effective != KEEP && !self.holds(effective)))
        {
            return Err(Errno::EPERM);
        }
        let old_real = self.real;
        if real != KEEP {
            self.real = real;
        }
        if effective != KEEP {
            self.effective = effective;
        }
        // The saved id follows the effective one when the real id was set,
        // or the effective id was set to something other than the old real.
        if real != KEEP || (effective != KEEP && effective != old_real) {
            self.saved = self.effective;
        }
        self.fs = self.effective;
        Ok(())
    }

    /// setresuid(2).
    pub fn set_res(&mut self, real: u32, effective: u32, saved: u32, privileged: bool) -> Result<(), Errno> {
        if !privileged && [real, effective, saved].iter().any(|&id| id != KEEP && !self.holds(id)) {
            return Err(Errno::EPERM);
        }
        if real != KEEP {
            self.real = real;
        }
        if effective != KEEP {
            self.effective = effective;
        }
        if saved != KEEP {
            self.saved = saved;
        }
        self.fs = self.effective;
        Ok(())
    }

    /// setfsuid(2): returns the old fs id whether or not it changed.
    pub fn set_fs(&mut self, id: u32, privileged: bool) -> u32 {
        let old = self.fs;
        if id != KEEP && (privileged || self.holds(id) || id == self.fs) {
            self.fs = id;
        }
        old
    }
}

/// Capability numbers (linux/capability.h).
pub mod cap {
    pub const CHOWN: u32 = 0;
    pub const DAC_OVERRIDE: u32 = 1;
    pub const DAC_READ_SEARCH: u32 = 2;
    pub const FOWNER: u32 = 3;
    pub const FSETID: u32 = 4;
    pub const KILL: u32 = 5;
    pub const SETGID: u32 = 6;
    pub const SETUID: u32 = 7;
    pub const SETPCAP: u32 = 8;
    pub const LINUX_IMMUTABLE: u32 = 9;
    pub const NET_BIND_SERVICE: u32 = 10;
    pub const NET_BROADCAST: u32 = 11;
    pub const NET_ADMIN: u32 = 12;
    pub const NET_RAW: u32 = 13;
    pub const IPC_LOCK: u32 = 14;
    pub const SYS_CHROOT: u32 = 18;
    pub const SYS_PTRACE: u32 = 19;
    pub const SYS_ADMIN: u32 = 21;
    pub const SYS_NICE: u32 = 23;
    pub const SYS_RESOURCE: u32 = 24;
    pub const SYS_TIME: u32 = 25;
    pub const MKNOD: u32 = 27;
    pub const AUDIT_WRITE: u32 = 29;
    pub const SETFCAP: u32 = 31;
    pub const MAC_OVERRIDE: u32 = 32;
    /// The highest capability Linux knows (CAP_CHECKPOINT_RESTORE).
    pub const LAST: u32 = 40;

    /// Every capability's name, by number, as capabilities(7) spells it
    /// without the CAP_ prefix.
    pub const NAMES: [&str; LAST as usize + 1] = [
        "CHOWN",
        "DAC_OVERRIDE",
        "DAC_READ_SEARCH",
        "FOWNER",
        "FSETID",
        "KILL",
        "SETGID",
        "SETUID",
        "SETPCAP",
        "LINUX_IMMUTABLE",
        "NET_BIND_SERVICE",
        "NET_BROADCAST",
        "NET_ADMIN",
        "NET_RAW",
        "IPC_LOCK",
        "IPC_OWNER",
        "SYS_MODULE",
        "SYS_RAWIO",
        "SYS_CHROOT",
        "SYS_PTRACE",
        "SYS_PACCT",
        "SYS_ADMIN",
        "SYS_BOOT",
        "SYS_NICE",
        "SYS_RESOURCE",
        "SYS_TIME",
        "SYS_TTY_CONFIG",
        "MKNOD",
        "LEASE",
        "AUDIT_WRITE",
        "AUDIT_CONTROL",
        "SETFCAP",
        "MAC_OVERRIDE",
        "MAC_ADMIN",
        "SYSLOG",
        "WAKE_ALARM",
        "BLOCK_SUSPEND",
        "AUDIT_READ",
        "PERFMON",
        "BPF",
        "CHECKPOINT_RESTORE",
    ];

    /// The capability called `name`, as docker reads `--cap-add`: with or
    /// without the CAP_ prefix, in any case.
    pub fn by_name(name: &str) -> Option<u32> {
        let upper = name.to_ascii_uppercase();
        let bare = upper.strip_prefix("CAP_").unwrap_or(&upper);
        NAMES.iter().position(|n| *n == bare).map(|c| c as u32)
    }
}

/// A set of capabilities, one bit per capability number.
pub type CapSet = u64;

/// Most supplementary groups a process may have (NGROUPS_MAX).
pub const NGROUPS_MAX: u64 = 65536;

/// Every capability.
pub const ALL_CAPS: CapSet = (1 << (cap::LAST + 1)) - 1;

/// What docker and runsc grant a container's root by default, and its
/// bounding set: CAP_SYS_ADMIN, CAP_SYS_TIME, CAP_NET_ADMIN,
/// CAP_SYS_PTRACE and the other powers over the machine are not in it.
pub const CONTAINER_DEFAULT: CapSet = bit(cap::CHOWN)
    | bit(cap::DAC_OVERRIDE)
    | bit(cap::FSETID)
    | bit(cap::FOWNER)
    | bit(cap::MKNOD)
    | bit(cap::NET_RAW)
    | bit(cap::SETGID)
    | bit(cap::SETUID)
    | bit(cap::SETFCAP)
    | bit(cap::SETPCAP)
    | bit(cap::NET_BIND_SERVICE)
    | bit(cap::SYS_CHROOT)
    | bit(cap::KILL)
    | bit(cap::AUDIT_WRITE);

/// securebits(7): flags that change how uid 0 and uid changes affect the
/// capabilities, each with a lock bit just above it that freezes it.
pub mod secure {
    /// uid 0 gets no capabilities at execve.
    pub const NOROOT: u32 = 1 << 0;
    /// Changing uids leaves the capabilities alone.
    pub const NO_SETUID_FIXUP: u32 = 1 << 2;
    /// Leaving uid 0 keeps the permitted set (PR_SET_KEEPCAPS).
    pub const KEEP_CAPS: u32 = 1 << 4;
    /// PR_CAP_AMBIENT_RAISE is refused.
    pub const NO_CAP_AMBIENT_RAISE: u32 = 1 << 6;
    /// The flags PR_SET_SECUREBITS knows.
    pub const ALL_BITS: u32 = NOROOT | NO_SETUID_FIXUP | KEEP_CAPS | NO_CAP_AMBIENT_RAISE;
    /// Their locks.
    pub const ALL_LOCKS: u32 = ALL_BITS << 1;
}

const fn bit(c: u32) -> CapSet {
    1 << c
}

/// The capabilities that follow the file-system user id (Linux's
/// CAP_FS_SET): dropped when it leaves 0, raised from the permitted set
/// when it returns.
const FS_CAPS: CapSet = bit(cap::CHOWN)
    | bit(cap::DAC_OVERRIDE)
    | bit(cap::DAC_READ_SEARCH)
    | bit(cap::FOWNER)
    | bit(cap::FSETID)
    | bit(cap::LINUX_IMMUTABLE)
    | bit(cap::MKNOD)
    | bit(cap::MAC_OVERRIDE);

/// A process's capability sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Caps {
    pub effective: CapSet,
    pub permitted: CapSet,
    pub inheritable: CapSet,
    /// What execve may grant at most (PR_CAPBSET_READ/DROP).
    pub bounding: CapSet,
    pub ambient: CapSet,
}

impl Caps {
    /// What a process of `euid` holds where user namespaces play no part:
    /// root everything, anyone else nothing.
    pub fn for_euid(euid: u32) -> Caps {
        Caps::granted(euid, ALL_CAPS)
    }

    /// What a container's first process of `euid` holds when the runtime
    /// grants `set`: root all of it, anyone else none; `set` bounds what
    /// any later program may gain.
    pub fn granted(euid: u32, set: CapSet) -> Caps {
        let held = if euid == 0 { set } else { 0 };
        Caps { effective: held, permitted: held, inheritable: 0, bounding: set, ambient: 0 }
    }
}

/// The capabilities a program file carries (its `security.capability`
/// extended attribute, vfs_cap_data).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileCaps {
    pub permitted: CapSet,
    pub inheritable: CapSet,
    /// The permitted set becomes effective at execve.
    pub effective: bool,
}

/// VFS_CAP_REVISION_1, _2 and _3 in the top byte of magic_etc.
const VFS_CAP_REVISION_MASK: u32 = 0xff00_0000;
const VFS_CAP_REVISION_1: u32 = 0x0100_0000;
const VFS_CAP_REVISION_2: u32 = 0x0200_0000;
const VFS_CAP_REVISION_3: u32 = 0x0300_0000;
const VFS_CAP_FLAGS_EFFECTIVE: u32 = 0x0000_0001;

/// The name of the attribute that holds a file's capabilities.
pub const FILE_CAPS_XATTR: &[u8] = b"security.capability";

impl FileCaps {
    /// Reads a `security.capability` value as Linux's
    /// get_vfs_caps_from_disk() does: None for a malformed one, and for a
    /// revision 3 value whose root id is not 0 (it belongs to a user
    /// namespace, and the sandbox has none).
    pub fn parse(value: &[u8]) -> Option<FileCaps> {
        let word = |i: usize| -> Option<u32> {
            value.get(4 * i..4 * i + 4).map(|b| u32::from_le_bytes(b.try_into().unwrap()))
        };
        let magic = word(0)?;
        let words = match (magic & VFS_CAP_REVISION_MASK, value.len()) {
            (VFS_CAP_REVISION_1, 12) => 1,
            (VFS_CAP_REVISION_2, 20) => 2,
            (VFS_CAP_REVISION_3, 24) if word(5)? == 0 => 2,
            _ => return None,
        };
        let mut permitted = 0;
        let mut inheritable = 0;
        for w in 0..words {
            permitted |= CapSet::from(word(1 + 2 * w)?) << (32 * w);
            inheritable |= CapSet::from(word(2 + 2 * w)?) << (32 * w);
        }
        Some(FileCaps {
            permitted: permitted & ALL_CAPS,
            inheritable: inheritable & ALL_CAPS,
            effective: magic & VFS_CAP_FLAGS_EFFECTIVE != 0,
        })
    }

    /// What setting `security.capability` to `value` stores, as Linux's
    /// cap_convert_nscap(): None unless a revision 2 or 3 value of its
    /// size; a revision 3 value for root id 0 is a revision 2 one, as it
    /// reads back where there are no user namespaces.
    pub fn stored_form(value: &[u8]) -> Option<Vec<u8>> {
        let magic = u32::from_le_bytes(value.get(..4)?.try_into().unwrap());
        match (magic & VFS_CAP_REVISION_MASK, value.len()) {
            (VFS_CAP_REVISION_2, 20) => Some(value.to_vec()),
            (VFS_CAP_REVISION_3, 24) if value[20..24] == [0; 4] => {
                let mut v2 = value[..20].to_vec();
                v2[..4].copy_from_slice(&(VFS_CAP_REVISION_2 | (magic & VFS_CAP_FLAGS_EFFECTIVE)).to_le_bytes());
                Some(v2)
            }
            (VFS_CAP_REVISION_3, 24) => Some(value.to_vec()),
            _ => None,
        }
    }
}

/// What an execve changes the credentials with: the program file's
/// set-user-id and set-group-id owners (already refused by the mount, if
/// nosuid) and its capabilities.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FilePrivileges {
    pub setuid: Option<u32>,
    pub setgid: Option<u32>,
    pub caps: Option<FileCaps>,
}

/// A process's identity: its ids and the capabilities that go with them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Creds {
    pub uid: Ids,
    pub gid: Ids,
    /// Supplementary groups.
    pub groups: Vec<u32>,
    pub caps: Caps,
    /// securebits(7): [`secure`] flags and their locks.
    pub securebits: u32,
}

impl Creds {
    /// The sandbox's first process: the ids of the calling host process,
    /// asked once at start-up before cordon gives up its host identity,
    /// with the capabilities the sandbox grants (`granted`, as a container
    /// runtime's set), never the host process's own.
    pub fn of_host(granted: CapSet) -> Creds {
        use rustix::process::{getegid, geteuid, getgid, getuid};
        let euid = geteuid().as_raw();
        let egid = getegid().as_raw();
        Creds {
            uid: Ids { real: getuid().as_raw(), effective: euid, saved: euid, fs: euid },
            gid: Ids { real: getgid().as_raw(), effective: egid, saved: egid, fs: egid },
            groups: rustix::process::getgroups().unwrap_or_default().iter().map(|g| g.as_raw()).collect(),
            caps: Caps::granted(euid, granted & ALL_CAPS),
            securebits: 0,
        }
    }

    /// An identity of `uid` and `gid` with the capabilities Linux gives it.
    pub fn new(uid: u32, gid: u32, groups: Vec<u32>) -> Creds {
        Creds { uid: Ids::all(uid), gid: Ids::all(gid), groups, caps: Caps::for_euid(uid), securebits: 0 }
    }

    /// True if securebit `flag` is set (issecure()).
    pub fn secure(&self, flag: u32) -> bool {
        self.securebits & flag != 0
    }

    /// PR_SET_KEEPCAPS: refused once SECBIT_KEEP_CAPS_LOCKED is set.
    pub fn set_keep_caps(&mut self, keep: bool) -> Result<(), Errno> {
        if self.secure(secure::KEEP_CAPS << 1) {
            return Err(Errno::EPERM);
        }
        if keep {
            self.securebits |= secure::KEEP_CAPS;
        } else {
            self.securebits &= !secure::KEEP_CAPS;
        }
        Ok(())
    }

    /// PR_SET_SECUREBITS, as Linux's cap_task_prctl(): needs CAP_SETPCAP;
    /// a locked flag may not change, a lock may not be released, and
    /// unknown bits are refused.
    pub fn set_securebits(&mut self, bits: u64) -> Result<(), Errno> {
        let old = self.securebits;
        let Ok(new) = u32::try_from(bits) else { return Err(Errno::EPERM) };
        let locked_flags = (old & secure::ALL_LOCKS) >> 1;
        if locked_flags & (old ^ new) != 0
            || old & secure::ALL_LOCKS & !new != 0
            || new & !(secure::ALL_LOCKS | secure::ALL_BITS) != 0
            || !self.has(cap::SETPCAP)
        {
            return Err(Errno::EPERM);
        }
        self.securebits = new;
        Ok(())
    }

    /// PR_CAP_AMBIENT_RAISE: only what is both permitted and inheritable,
    /// and not under SECBIT_NO_CAP_AMBIENT_RAISE.
    pub fn raise_ambient(&mut self, c: u32) -> Result<(), Errno> {
        let b = bit(c);
        if self.caps.permitted & self.caps.inheritable & b == 0 || self.secure(secure::NO_CAP_AMBIENT_RAISE) {
            return Err(Errno::EPERM);
        }
        self.caps.ambient |= b;
        Ok(())
    }

    /// True if the effective set holds capability `c` (capable()).
    pub fn has(&self, c: u32) -> bool {
        self.caps.effective & bit(c) != 0
    }

    /// True if `gid` is the file-system group or a supplementary one
    /// (in_group_p()).
    pub fn in_group(&self, gid: u32) -> bool {
        self.gid.fs == gid || self.groups.contains(&gid)
    }

    /// May change user ids at will (CAP_SETUID).
    pub fn may_set_uid(&self) -> bool {
        self.has(cap::SETUID)
    }

    /// May change group ids and the supplementary groups at will
    /// (CAP_SETGID).
    pub fn may_set_gid(&self) -> bool {
        self.has(cap::SETGID)
    }

    /// May go past resource limits, such as raising a hard one
    /// (CAP_SYS_RESOURCE).
    pub fn may_exceed_limits(&self) -> bool {
        self.has(cap::SYS_RESOURCE)
    }

    /// The identity access(2) checks with, unless AT_EACCESS: the real ids,
    /// and for a real uid other than 0 no capabilities at all
    /// (access_override_creds()).
    pub fn for_access(&self) -> Creds {
        let mut c = self.clone();
        c.uid.fs = c.uid.real;
        c.gid.fs = c.gid.real;
        // Under SECBIT_NO_SETUID_FIXUP the effective set stays as it is.
        if !self.secure(secure::NO_SETUID_FIXUP) {
            c.caps.effective = if c.uid.real == 0 { c.caps.permitted } else { 0 };
        }
        c
    }

    /// Adjusts the capabilities after setuid, setreuid or setresuid
    /// changed the user ids from `old`, as Linux's cap_emulate_setxuid()
    /// does: leaving uid 0 altogether drops the permitted set (unless
    /// SECBIT_KEEP_CAPS) and the ambient one; the effective set follows the
    /// effective uid out of and back into 0. SECBIT_NO_SETUID_FIXUP turns
    /// all of it off.
    pub fn fix_caps_after_setuid(&mut self, old: &Ids) {
        if self.secure(secure::NO_SETUID_FIXUP) {
            return;
        }
        let had_root = old.real == 0 || old.effective == 0 || old.saved == 0;
        let has_root = self.uid.real == 0 || self.uid.effective == 0 || self.uid.saved == 0;
        if had_root && !has_root {
            if !self.secure(secure::KEEP_CAPS) {
                self.caps.permitted = 0;
                self.caps.effective = 0;
            }
            self.caps.ambient = 0;
        }
        if old.effective == 0 && self.uid.effective != 0 {
            self.caps.effective = 0;
        }
        if old.effective != 0 && self.uid.effective == 0 {
            self.caps.effective = self.caps.permitted;
        }
    }

    /// The file-system capabilities follow the file-system uid in and out
    /// of 0.
    pub fn fix_caps_after_setfsuid(&mut self, old_fs: u32) {
        if self.secure(secure::NO_SETUID_FIXUP) {
            return;
        }
        if old_fs == 0 && self.uid.fs != 0 {
            self.caps.effective &= !FS_CAPS;
        } else if old_fs != 0 && self.uid.fs == 0 {
            self.caps.effective |= self.caps.permitted & FS_CAPS;
        }
    }

    /// The credentials a new program runs with, as Linux's
    /// cap_bprm_creds_from_file() computes them from `file`'s set-id bits
    /// and capabilities. `no_new_privs` (or a task that may not gain
    /// privileges for another reason) keeps the ids and caps the permitted
    /// set at what it was. Fails with EPERM when the file's capabilities
    /// are effective but the bounding and inheritable sets keep some of
    /// its permitted ones from the program. Returns whether the program
    /// runs with more privilege than its caller had (AT_SECURE).
    pub fn exec(&mut self, file: &FilePrivileges, no_new_privs: bool) -> Result<bool, Errno> {
        let old = self.clone();
        // Set-id bits are ignored under no_new_privs (bprm_fill_uid()).
        if !no_new_privs {
            if let Some(uid) = file.setuid {
                self.uid.effective = uid;
            }
            if let Some(gid) = file.setgid {
                self.gid.effective = gid;
            }
        }
        let c = &mut self.caps;
        // A file's capabilities: pP' = (pB & fP) | (pI & fI).
        let mut effective = false;
        c.permitted = 0;
        if let Some(f) = file.caps {
            c.permitted = (old.caps.bounding & f.permitted) | (old.caps.inheritable & f.inheritable);
            effective = f.effective;
            if effective && f.permitted & !c.permitted != 0 {
                *self = old;
                return Err(Errno::EPERM);
            }
        }
        // uid 0 counts as a file allowing everything (handle_privileged_root),
        // but not a set-user-id-root program with file capabilities run by
        // someone else.
        let has_fcap = file.caps.is_some();
        let is_setuid_root = self.uid.effective == 0 && self.uid.real != 0;
        let root_ignored = old.secure(secure::NOROOT) || (has_fcap && is_setuid_root);
        if !root_ignored {
            if self.uid.effective == 0 || self.uid.real == 0 {
                c.permitted = old.caps.bounding | old.caps.inheritable;
            }
            if self.uid.effective == 0 {
                effective = true;
            }
        }
        let gained = c.permitted & !old.caps.permitted != 0;
        let is_setid = self.uid.effective != old.uid.real || self.gid.effective != old.gid.real;
        if (is_setid || gained) && no_new_privs {
            self.uid.effective = self.uid.real;
            self.gid.effective = self.gid.real;
            self.caps.permitted &= old.caps.permitted;
        }
        self.uid.saved = self.uid.effective;
        self.uid.fs = self.uid.effective;
        self.gid.saved = self.gid.effective;
        self.gid.fs = self.gid.effective;
        let c = &mut self.caps;
        if has_fcap || is_setid {
            c.ambient = 0;
        }
        c.permitted |= c.ambient;
        c.effective = if effective { c.permitted } else { c.ambient };
        self.securebits &= !secure::KEEP_CAPS;
        let grew = c.permitted & !c.ambient != 0;
        Ok(is_setid || (self.uid.real != 0 && (effective || grew)))
    }

    /// capset(2) for the caller's own sets.
    pub fn set_caps(&mut self, effective: CapSet, permitted: CapSet, inheritable: CapSet) -> Result<(), Errno> {
        let c = &self.caps;
        let within = |a: CapSet, b: CapSet| a & !b == 0;
        if !self.has(cap::SETPCAP) && !within(inheritable, c.inheritable | c.permitted) {
            return Err(Errno::EPERM);
        }
        if !within(inheritable, c.inheritable | c.bounding) {
            return Err(Errno::EPERM);
        }
        if !within(permitted, c.permitted) || !within(effective, permitted) {
            return Err(Errno::EPERM);
        }
        let ambient = c.ambient & permitted & inheritable;
        self.caps = Caps { effective, permitted, inheritable, ambient, ..self.caps };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_may_become_anyone_and_then_not_back() {
        let mut u = Ids::all(0);
        u.set(1000, true).unwrap();
        assert_eq!(u, Ids::all(1000));
        assert_eq!(u.set(0, false), Err(Errno::EPERM));
    }

    #[test]
    fn unprivileged_moves_between_held_ids() {
        let mut u = Ids { real: 1000, effective: 1000, saved: 2000, fs: 1000 };
        u.set(2000, false).unwrap();
        assert_eq!((u.real, u.effective, u.saved, u.fs), (1000, 2000, 2000, 2000));
        assert_eq!(u.set(3000, false), Err(Errno::EPERM));
        u.set(1000, false).unwrap();
        assert_eq!(u.effective, 1000);
        assert_eq!(u.set(1000, false), Ok(()), "setting the id one has is allowed");
    }

    #[test]
    fn setreuid_swaps_and_updates_saved() {
        let mut u = Ids { real: 1000, effective: 2000, saved: 2000, fs: 2000 };
        u.set_re(2000, 1000, false).unwrap();
        assert_eq!((u.real, u.effective, u.saved), (2000, 1000, 1000));
        assert_eq!(u.set_re(3000, KEEP, false), Err(Errno::EPERM));
        let mut u = Ids { real: 1000, effective: 1000, saved: 2000, fs: 1000 };
        u.set_re(KEEP, 2000, false).unwrap();
        assert_eq!(u.saved, 2000, "effective set to other than the old real updates saved");
        assert_eq!(u.set_re(KEEP, KEEP, false), Ok(()));
    }

    #[test]
    fn setresuid_checks_each_id() {
        let mut u = Ids { real: 1, effective: 2, saved: 3, fs: 2 };
        u.set_res(3, 1, KEEP, false).unwrap();
        assert_eq!((u.real, u.effective, u.saved, u.fs), (3, 1, 3, 1));
        assert_eq!(u.set_res(KEEP, KEEP, 9, false), Err(Errno::EPERM));
        u.set_res(9, 9, 9, true).unwrap();
        assert_eq!(u, Ids::all(9));
    }

    #[test]
    fn setfsuid_reports_the_old_value() {
        let mut u = Ids { real: 1, effective: 2, saved: 3, fs: 2 };
        assert_eq!(u.set_fs(3, false), 2);
        assert_eq!(u.fs, 3);
        assert_eq!(u.set_fs(7, false), 3);
        assert_eq!(u.fs, 3, "refused quietly");
        assert_eq!(u.set_fs(KEEP, false), 3, "-1 only asks");
    }

    #[test]
    fn leaving_root_drops_capabilities_unless_kept() {
        let mut c = Creds::new(0, 0, Vec::new());
        let old = c.uid;
        c.uid.set(1000, true).unwrap();
        c.fix_caps_after_setuid(&old);
        assert_eq!((c.caps.effective, c.caps.permitted), (0, 0));

        let mut c = Creds::new(0, 0, Vec::new());
        c.securebits |= secure::KEEP_CAPS;
        let old = c.uid;
        c.uid.set(1000, true).unwrap();
        c.fix_caps_after_setuid(&old);
        assert_eq!((c.caps.effective, c.caps.permitted), (0, ALL_CAPS), "kept, not effective");
    }

    #[test]
    fn effective_caps_follow_the_effective_uid() {
        let mut c = Creds::new(0, 0, Vec::new());
        let old = c.uid;
        c.uid.set_re(KEEP, 1000, true).unwrap();
        c.fix_caps_after_setuid(&old);
        assert_eq!((c.caps.effective, c.caps.permitted), (0, ALL_CAPS));
        let old = c.uid;
        c.uid.set_re(KEEP, 0, false).unwrap();
        c.fix_caps_after_setuid(&old);
        assert_eq!(c.caps.effective, ALL_CAPS);
        let old_fs = c.uid.set_fs(1000, true);
        c.fix_caps_after_setfsuid(old_fs);
        assert!(!c.has(cap::DAC_OVERRIDE) && c.has(cap::KILL), "only the file-system set goes");
        // A setresuid that leaves the effective uid at 0 resets the
        // file-system uid but not the capabilities it took.
        let old = c.uid;
        c.uid.set_res(KEEP, 0, KEEP, true).unwrap();
        c.fix_caps_after_setuid(&old);
        assert_eq!(c.uid.fs, 0);
        assert!(!c.has(cap::DAC_OVERRIDE));
    }

    #[test]
    fn leaving_root_always_drops_the_ambient_set() {
        let mut c = Creds::new(0, 0, Vec::new());
        c.securebits |= secure::KEEP_CAPS;
        c.caps.inheritable = 1 << cap::KILL;
        c.caps.ambient = 1 << cap::KILL;
        let old = c.uid;
        c.uid.set(1000, true).unwrap();
        c.fix_caps_after_setuid(&old);
        assert_eq!(c.caps.ambient, 0);
        c.exec(&FilePrivileges::default(), false).unwrap();
        assert_eq!((c.caps.permitted, c.caps.effective), (0, 0), "a non-root program keeps only ambient ones");
    }

    #[test]
    fn capset_never_widens() {
        let mut c = Creds::new(1000, 1000, Vec::new());
        assert_eq!(c.set_caps(1, 1, 0), Err(Errno::EPERM));
        let mut c = Creds::new(0, 0, Vec::new());
        c.set_caps(0, 1 << cap::KILL, 0).unwrap();
        assert_eq!(c.set_caps(1 << cap::CHOWN, 1 << cap::KILL, 0), Err(Errno::EPERM));
        assert_eq!(c.set_caps(0, ALL_CAPS, 0), Err(Errno::EPERM));
        c.exec(&FilePrivileges::default(), false).unwrap();
        assert_eq!(c.caps.permitted, ALL_CAPS, "root's next program has the bounding set");
    }

    #[test]
    fn a_container_grants_its_set_to_root_only() {
        let root = Caps::granted(0, CONTAINER_DEFAULT);
        assert_eq!(
            (root.effective, root.permitted, root.bounding),
            (CONTAINER_DEFAULT, CONTAINER_DEFAULT, CONTAINER_DEFAULT)
        );
        assert!(root.effective & bit(cap::SYS_ADMIN) == 0 && root.effective & bit(cap::NET_RAW) != 0);
        let user = Caps::granted(1000, CONTAINER_DEFAULT);
        assert_eq!((user.effective, user.permitted, user.bounding), (0, 0, CONTAINER_DEFAULT));
    }

    #[test]
    fn capability_names_as_docker_spells_them() {
        assert_eq!(cap::by_name("CAP_SYS_ADMIN"), Some(cap::SYS_ADMIN));
        assert_eq!(cap::by_name("sys_admin"), Some(cap::SYS_ADMIN));
        assert_eq!(cap::by_name("Cap_Net_Raw"), Some(cap::NET_RAW));
        assert_eq!(cap::by_name("checkpoint_restore"), Some(cap::LAST));
        assert_eq!(cap::by_name("CAP_FLY"), None);
        assert_eq!(cap::by_name("ALL"), None, "ALL is the command line's, not a capability");
    }

    #[test]
    fn securebits_locks_hold() {
        let mut c = Creds::new(0, 0, Vec::new());
        c.set_securebits(u64::from(secure::KEEP_CAPS | secure::KEEP_CAPS << 1)).unwrap();
        assert_eq!(c.set_keep_caps(false), Err(Errno::EPERM));
        assert_eq!(c.set_securebits(u64::from(secure::KEEP_CAPS)), Err(Errno::EPERM), "a lock stays");
        assert_eq!(c.set_securebits(1 << 20), Err(Errno::EPERM), "unknown bits");
        c.exec(&FilePrivileges::default(), false).unwrap();
        assert_eq!(c.securebits, secure::KEEP_CAPS << 1, "execve clears the flag, not its lock");
        let mut nobody = Creds::new(1000, 1000, Vec::new());
        assert_eq!(nobody.set_securebits(u64::from(secure::NOROOT)), Err(Errno::EPERM), "needs CAP_SETPCAP");
    }

    fn caps_value(revision: u32, effective: bool, permitted: u32, rootid: u32) -> Vec<u8> {
        let words = [revision << 24 | u32::from(effective), permitted, 0, 0, 0, rootid];
        let len = match revision {
            1 => 3,
            2 => 5,
            _ => 6,
        };
        words[..len].iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    #[test]
    fn file_capabilities_read_as_linux_reads_them() {
        let f = FileCaps::parse(&caps_value(2, true, 1 << cap::KILL, 0)).unwrap();
        assert_eq!((f.permitted, f.effective), (1 << cap::KILL, true));
        assert!(FileCaps::parse(&caps_value(3, false, 1 << cap::KILL, 0)).is_some());
        assert_eq!(FileCaps::parse(&caps_value(3, false, 1 << cap::KILL, 1000)), None, "another namespace's");
        assert!(FileCaps::parse(&caps_value(1, false, 1, 0)).is_some());
        assert_eq!(FileCaps::parse(&[1, 2, 3]), None);
        assert_eq!(FileCaps::stored_form(&caps_value(1, false, 1, 0)), None, "revision 1 is not written");
        assert_eq!(FileCaps::stored_form(&caps_value(3, true, 8, 0)), Some(caps_value(2, true, 8, 0)));
        assert_eq!(FileCaps::stored_form(&caps_value(3, true, 8, 7)), Some(caps_value(3, true, 8, 7)));
    }

    #[test]
    fn execve_grants_file_capabilities_within_the_bounding_set() {
        let mut c = Creds { caps: Caps::granted(1000, CONTAINER_DEFAULT), ..Creds::new(1000, 1000, Vec::new()) };
        let file = |permitted: CapSet, effective| FilePrivileges {
            caps: Some(FileCaps { permitted, inheritable: 0, effective }),
            ..Default::default()
        };
        assert_eq!(c.exec(&file(bit(cap::KILL), true), false), Ok(true), "AT_SECURE");
        assert_eq!((c.caps.permitted, c.caps.effective), (bit(cap::KILL), bit(cap::KILL)));
        assert_eq!(c.exec(&file(bit(cap::SYS_ADMIN), true), false), Err(Errno::EPERM));
        assert_eq!(c.caps.permitted, bit(cap::KILL), "unchanged when refused");
        c.exec(&file(bit(cap::SYS_ADMIN) | bit(cap::KILL), false), false).unwrap();
        assert_eq!((c.caps.permitted, c.caps.effective), (bit(cap::KILL), 0));
        // no_new_privs: nothing gained.
        c.exec(&FilePrivileges::default(), false).unwrap();
        c.exec(&file(bit(cap::KILL), true), true).unwrap();
        assert_eq!(c.caps.permitted, 0);
    }

    #[test]
    fn setuid_root_programs_run_as_root() {
        let mut c = Creds { caps: Caps::granted(1000, CONTAINER_DEFAULT), ..Creds::new(1000, 1000, Vec::new()) };
        let suid = FilePrivileges { setuid: Some(0), ..Default::default() };
        assert_eq!(c.exec(&suid, true), Ok(false), "ignored under no_new_privs");
        assert_eq!(c.uid.effective, 1000);
        assert_eq!(c.exec(&suid, false), Ok(true));
        assert_eq!((c.uid.real, c.uid.effective, c.uid.saved), (1000, 0, 0));
        assert_eq!(c.caps.effective, CONTAINER_DEFAULT);
    }
}
