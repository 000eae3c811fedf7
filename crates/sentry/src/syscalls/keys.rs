//! Keyrings, as a container runtime provides them: each process has a
//! session keyring (made when first wanted, inherited by fork, kept by
//! execve, replaced by KEYCTL_JOIN_SESSION_KEYRING) holding "user" keys and
//! other keyrings. add_key, request_key (no upcall: what is not found is
//! ENOKEY) and keyctl's GET_KEYRING_ID (session keyring), JOIN_SESSION_KEYRING,
//! DESCRIBE, READ, UPDATE, REVOKE, LINK, UNLINK, CLEAR and SEARCH; the other
//! operations, and the thread, process and user keyrings, are EOPNOTSUPP.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{LazyLock, Mutex};

use super::{SysError, SysResult};
use crate::errno::Errno;
use crate::task::Task;

const KEY_SPEC_THREAD_KEYRING: i32 = -1;
const KEY_SPEC_SESSION_KEYRING: i32 = -3;
const KEY_SPEC_REQKEY_AUTH_KEY: i32 = -7;

const KEYCTL_GET_KEYRING_ID: u32 = 0;
const KEYCTL_JOIN_SESSION_KEYRING: u32 = 1;
const KEYCTL_UPDATE: u32 = 2;
const KEYCTL_REVOKE: u32 = 3;
const KEYCTL_DESCRIBE: u32 = 6;
const KEYCTL_CLEAR: u32 = 7;
const KEYCTL_LINK: u32 = 8;
const KEYCTL_UNLINK: u32 = 9;
const KEYCTL_SEARCH: u32 = 10;
const KEYCTL_READ: u32 = 11;

/// Permission bits, per holder class (possessor, user, group, other).
const VIEW: u32 = 0x01;
const READ: u32 = 0x02;
const WRITE: u32 = 0x04;
const SEARCH: u32 = 0x08;
const LINK: u32 = 0x10;
/// Linux's defaults: the possessor may do anything; the owner may view
/// what add_key made, view and read a session keyring, and view, read and
/// link a named one.
const ADDED_KEY_PERM: u32 = 0x3f01_0000;
const SESSION_KEYRING_PERM: u32 = 0x3f03_0000;
const NAMED_KEYRING_PERM: u32 = 0x3f13_0000;

/// Largest "user" payload, and description.
const USER_PAYLOAD_MAX: usize = 32767;
const DESCRIPTION_MAX: usize = 4095;

#[derive(Clone)]
enum Content {
    User(Vec<u8>),
    /// The keys a keyring links, in the order linked.
    Keyring(Vec<i32>),
}

struct Key {
    description: Vec<u8>,
    content: Content,
    uid: u32,
    gid: u32,
    perm: u32,
    revoked: bool,
}

impl Key {
    fn type_name(&self) -> &'static str {
        match self.content {
            Content::User(_) => "user",
            Content::Keyring(_) => "keyring",
        }
    }
}

/// Every key of the sandbox, by serial number.
struct Keys {
    keys: BTreeMap<i32, Key>,
    next: i32,
}

static KEYS: LazyLock<Mutex<Keys>> = LazyLock::new(|| Mutex::new(Keys { keys: BTreeMap::new(), next: 0x1000_0000 }));

impl Keys {
    fn add(&mut self, key: Key) -> i32 {
        let serial = self.next;
        self.next = self.next.checked_add(1).unwrap_or(0x1000_0000);
        self.keys.insert(serial, key);
        serial
    }

    fn new_keyring(&mut self, task: &Task, name: &[u8], perm: u32) -> i32 {
        let c = task.tg.creds();
        self.add(Key {
            description: name.to_vec(),
            content: Content::Keyring(Vec::new()),
            uid: c.uid.fs,
            gid: c.gid.fs,
            perm,
            revoked: false,
        })
    }

    /// The caller's session keyring, made on first use.
    fn session(&mut self, task: &Task) -> i32 {
        let id = task.tg.session_keyring.load(Ordering::Acquire);
        if self.keys.contains_key(&id) {
            return id;
        }
        let id = self.new_keyring(task, b"_ses", SESSION_KEYRING_PERM);
        task.tg.session_keyring.store(id, Ordering::Release);
        id
    }

    /// True if `id` is reachable from the caller's session keyring through
    /// keyrings it may search (Linux's possession).
    fn possessed(&mut self, task: &Task, id: i32) -> bool {
        let mut todo = vec![self.session(task)];
        let mut seen = Vec::new();
        while let Some(k) = todo.pop() {
            if k == id {
                return true;
            }
            if seen.contains(&k) {
                continue;
            }
            seen.push(k);
            if let Some(Key { content: Content::Keyring(links), revoked: false, .. }) = self.keys.get(&k) {
                todo.extend(links.iter().copied());
            }
        }
        false
    }

    /// The key a serial or special id names, checked for `need`.
    fn lookup(&mut self, task: &Task, id: i32, need: u32) -> Result<i32, SysError> {
        let id = match id {
            KEY_SPEC_SESSION_KEYRING => self.session(task),
            KEY_SPEC_REQKEY_AUTH_KEY..=KEY_SPEC_THREAD_KEYRING => return Err(Errno::EOPNOTSUPP.into()),
            id if id > 0 => id,
            _ => return Err(Errno::EINVAL.into()),
        };
        if !self.keys.contains_key(&id) {
            return Err(Errno::ENOKEY.into());
        }
        let possessed = self.possessed(task, id);
        let key = &self.keys[&id];
        let c = task.tg.creds();
        let mut granted = key.perm & 0x3f;
        if c.uid.fs == key.uid {
            granted |= (key.perm >> 16) & 0x3f;
        }
        if c.in_group(key.gid) {
            granted |= (key.perm >> 8) & 0x3f;
        }
        if possessed {
            granted |= (key.perm >> 24) & 0x3f;
        }
        if granted & need != need {
            return Err(Errno::EACCES.into());
        }
        if key.revoked && need != 0 && need != VIEW {
            return Err(Errno::EKEYREVOKED.into());
        }
        Ok(id)
    }

    fn keyring_links(&mut self, id: i32) -> Result<&mut Vec<i32>, SysError> {
        match self.keys.get_mut(&id).map(|k| &mut k.content) {
            Some(Content::Keyring(links)) => Ok(links),
            _ => Err(Errno::ENOTDIR.into()),
        }
    }

    fn link(&mut self, keyring: i32, key: i32) -> Result<(), SysError> {
        let links = self.keyring_links(keyring)?;
        if !links.contains(&key) {
            links.push(key);
        }
        Ok(())
    }

    /// Depth-first search from `keyring` for a live key of `kind` named
    /// `description` (keyring_search()).
    fn search(&self, keyring: i32, kind: &[u8], description: &[u8]) -> Option<i32> {
        let mut todo = vec![keyring];
        let mut seen = Vec::new();
        while let Some(k) = todo.pop() {
            if seen.contains(&k) {
                continue;
            }
            seen.push(k);
            let Some(Key { content: Content::Keyring(links), revoked: false, .. }) = self.keys.get(&k) else {
                continue;
            };
            for l in links {
                if let Some(key) = self.keys.get(l)
                    && !key.revoked
                    && key.type_name().as_bytes() == kind
                    && key.description == description
                {
                    return Some(*l);
                }
            }
            todo.extend(links.iter().rev().copied());
        }
        None
    }
}

fn read_string(task: &Task, addr: u64, max: usize) -> Result<Vec<u8>, SysError> {
    if addr == 0 {
        return Err(Errno::EINVAL.into());
    }
    let s = task.mm.read_cstring(addr, max + 1)?;
    if s.len() > max {
        return Err(Errno::EINVAL.into());
    }
    Ok(s)
}

/// A key type the sandbox knows: "user" and "keyring"; others ENODEV, a
/// name beginning with a dot EPERM (internal types).
fn key_type(task: &Task, addr: u64) -> Result<Vec<u8>, SysError> {
    let t = read_string(task, addr, 31)?;
    if t.is_empty() {
        return Err(Errno::EINVAL.into());
    }
    if t.starts_with(b".") {
        return Err(Errno::EPERM.into());
    }
    if t != b"user" && t != b"keyring" {
        return Err(Errno::ENODEV.into());
    }
    Ok(t)
}

pub fn add_key(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let kind = key_type(task, a[0])?;
    let description = read_string(task, a[1], DESCRIPTION_MAX)?;
    if description.is_empty() {
        return Err(Errno::EINVAL.into());
    }
    let len = a[3] as usize;
    if len > 1024 * 1024 - 1 || (a[2] == 0 && len != 0) {
        return Err(Errno::EINVAL.into());
    }
    let mut payload = vec![0u8; len];
    task.mm.copy_in(a[2], &mut payload)?;
    let content = if kind == b"keyring" {
        if !payload.is_empty() {
            return Err(Errno::EINVAL.into());
        }
        Content::Keyring(Vec::new())
    } else {
        if payload.is_empty() || payload.len() > USER_PAYLOAD_MAX {
            return Err(Errno::EINVAL.into());
        }
        Content::User(payload)
    };
    let mut keys = KEYS.lock().unwrap();
    let keyring = keys.lookup(task, a[4] as i32, WRITE)?;
    keys.keyring_links(keyring)?;
    // A key of the same type and description there is updated (a
    // keyring is found again).
    let same = keys.keyring_links(keyring)?.clone().into_iter().find(|k| {
        keys.keys
            .get(k)
            .is_some_and(|key| !key.revoked && key.type_name().as_bytes() == kind && key.description == description)
    });
    if let Some(existing) = same {
        if let (Some(key), Content::User(p)) = (keys.keys.get_mut(&existing), content) {
            key.content = Content::User(p);
        }
        return Ok(existing as u64);
    }
    let c = task.tg.creds();
    let id = keys.add(Key { description, content, uid: c.uid.fs, gid: c.gid.fs, perm: ADDED_KEY_PERM, revoked: false });
    keys.link(keyring, id)?;
    Ok(id as u64)
}

pub fn request_key(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let kind = key_type(task, a[0])?;
    let description = read_string(task, a[1], DESCRIPTION_MAX)?;
    let mut keys = KEYS.lock().unwrap();
    let session = keys.session(task);
    let found = keys.search(session, &kind, &description).ok_or(Errno::ENOKEY)?;
    if a[3] as i32 != 0 {
        let dest = keys.lookup(task, a[3] as i32, WRITE)?;
        keys.link(dest, found)?;
    }
    Ok(found as u64)
}

/// Copies `data` out when it fits in `len` bytes at `buf`; returns its
/// size either way (keyctl_read_key()).
fn copy_if_fits(task: &Task, buf: u64, len: u64, data: &[u8]) -> SysResult {
    if buf != 0 && len as usize >= data.len() {
        task.mm.copy_out(buf, data)?;
    }
    Ok(data.len() as u64)
}

pub fn keyctl(task: &mut Task, a: &[u64; 6]) -> SysResult {
    let mut keys = KEYS.lock().unwrap();
    let id = a[1] as i32;
    match a[0] as u32 {
        KEYCTL_GET_KEYRING_ID => Ok(keys.lookup(task, id, 0)? as u64),
        KEYCTL_JOIN_SESSION_KEYRING => {
            let new = if a[1] == 0 {
                keys.new_keyring(task, b"_ses", SESSION_KEYRING_PERM)
            } else {
                let name = read_string(task, a[1], DESCRIPTION_MAX)?;
                // Only a keyring the caller may search without possessing
                // it is found by name (find_keyring_by_name()).
                let c = task.tg.creds();
                let existing = keys
                    .keys
                    .iter()
                    .find(|(_, k)| {
                        let searchable = k.perm & SEARCH != 0
                            || (c.uid.fs == k.uid && (k.perm >> 16) & SEARCH != 0)
                            || (c.in_group(k.gid) && (k.perm >> 8) & SEARCH != 0);
                        matches!(k.content, Content::Keyring(_)) && !k.revoked && k.description == name && searchable
                    })
                    .map(|(id, _)| *id);
                match existing {
                    // Already the session keyring: nothing changes.
                    Some(id) if id == task.tg.session_keyring.load(Ordering::Acquire) => return Ok(0),
                    Some(id) => id,
                    None => keys.new_keyring(task, &name, NAMED_KEYRING_PERM),
                }
            };
            task.tg.session_keyring.store(new, Ordering::Release);
            Ok(new as u64)
        }
        KEYCTL_UPDATE => {
            let id = keys.lookup(task, id, WRITE)?;
            let mut payload = vec![0u8; a[3] as usize];
            if payload.len() > USER_PAYLOAD_MAX {
                return Err(Errno::EINVAL.into());
            }
            task.mm.copy_in(a[2], &mut payload)?;
            match keys.keys.get_mut(&id) {
                Some(Key { content: Content::User(p), .. }) if !payload.is_empty() => *p = payload,
                Some(Key { content: Content::User(_), .. }) => return Err(Errno::EINVAL.into()),
                _ => return Err(Errno::EOPNOTSUPP.into()),
            }
            Ok(0)
        }
        KEYCTL_REVOKE => {
            let id = keys.lookup(task, id, WRITE)?;
            keys.keys.get_mut(&id).unwrap().revoked = true;
            Ok(0)
        }
        KEYCTL_DESCRIBE => {
            let id = keys.lookup(task, id, VIEW)?;
            let k = &keys.keys[&id];
            let mut text = format!("{};{};{};{:08x};", k.type_name(), k.uid, k.gid, k.perm).into_bytes();
            text.extend_from_slice(&k.description);
            text.push(0);
            copy_if_fits(task, a[2], a[3], &text)
        }
        KEYCTL_CLEAR => {
            let id = keys.lookup(task, id, WRITE)?;
            keys.keyring_links(id)?.clear();
            Ok(0)
        }
        KEYCTL_LINK => {
            let key = keys.lookup(task, id, LINK)?;
            let keyring = keys.lookup(task, a[2] as i32, WRITE)?;
            keys.link(keyring, key)?;
            Ok(0)
        }
        KEYCTL_UNLINK => {
            let key = keys.lookup(task, id, 0)?;
            let keyring = keys.lookup(task, a[2] as i32, WRITE)?;
            let links = keys.keyring_links(keyring)?;
            let at = links.iter().position(|k| *k == key).ok_or(Errno::ENOENT)?;
            links.remove(at);
            Ok(0)
        }
        KEYCTL_SEARCH => {
            let keyring = keys.lookup(task, id, SEARCH)?;
            keys.keyring_links(keyring)?;
            let kind = key_type(task, a[2])?;
            let description = read_string(task, a[3], DESCRIPTION_MAX)?;
            let found = keys.search(keyring, &kind, &description).ok_or(Errno::ENOKEY)?;
            if a[4] as i32 != 0 {
                let dest = keys.lookup(task, a[4] as i32, WRITE)?;
                keys.link(dest, found)?;
            }
            Ok(found as u64)
        }
        KEYCTL_READ => {
            let id = keys.lookup(task, id, READ)?;
            let data = match &keys.keys[&id].content {
                Content::User(p) => p.clone(),
                Content::Keyring(links) => links.iter().flat_map(|k| k.to_le_bytes()).collect(),
            };
            copy_if_fits(task, a[2], a[3], &data)
        }
        _ => Err(Errno::EOPNOTSUPP.into()),
    }
}
