// Node's fs under WORK (argv[2]): synchronous and promise-based writes,
// appends, renames, copies, streams, removal, and fs.watch, which must
// report each change made after the watcher was set up.
'use strict';
const fs = require('fs');
const path = require('path');

const work = process.argv[2];
fs.mkdirSync(work, { recursive: true });
process.chdir(work);

function listing(dir) {
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .map((e) => `${e.name}${e.isDirectory() ? '/' : e.isSymbolicLink() ? '@' : ''}`)
    .sort()
    .join(' ');
}

console.log('== sync');
fs.mkdirSync('dir/sub/deeper', { recursive: true });
fs.writeFileSync('dir/a.txt', 'alpha\n');
fs.appendFileSync('dir/a.txt', 'beta\n');
fs.renameSync('dir/a.txt', 'dir/sub/b.txt');
fs.copyFileSync('dir/sub/b.txt', 'dir/c.txt');
fs.writeFileSync('dir/big.bin', Buffer.alloc(3 << 20, 7));
fs.truncateSync('dir/big.bin', 1 << 20);
fs.symlinkSync('sub/b.txt', 'dir/link');
fs.chmodSync('dir/c.txt', 0o600);
fs.utimesSync('dir/c.txt', 1000000000, 1234567890.5);
console.log('listing:', listing('dir'));
console.log('b.txt:', JSON.stringify(fs.readFileSync('dir/sub/b.txt', 'utf8')));
console.log('through the link:', JSON.stringify(fs.readFileSync('dir/link', 'utf8')));
const st = fs.statSync('dir/c.txt');
console.log('c.txt mode', (st.mode & 0o777).toString(8), 'mtime', st.mtimeMs, 'size', st.size);
console.log('big.bin size', fs.statSync('dir/big.bin').size);
try {
  fs.mkdirSync('dir/sub');
} catch (e) {
  console.log('mkdir of an existing directory:', e.code);
}
try {
  fs.rmdirSync('dir/sub');
} catch (e) {
  console.log('rmdir of a non-empty directory:', e.code);
}
fs.rmSync('dir/sub', { recursive: true });
console.log('after rm -r sub:', listing('dir'));

async function asyncPart() {
  console.log('== promises and streams');
  const fsp = fs.promises;
  await Promise.all(
    Array.from({ length: 20 }, (_, i) => fsp.writeFile(`dir/p${String(i).padStart(2, '0')}`, 'x'.repeat(i * 100)))
  );
  await Promise.all(Array.from({ length: 10 }, (_, i) => fsp.rename(`dir/p0${i}`, `dir/r0${i}`)));
  const names = (await fsp.readdir('dir')).filter((n) => /^[pr]\d\d$/.test(n)).sort();
  console.log('renamed:', names.join(' '));
  let total = 0;
  for (const n of names) total += (await fsp.stat(`dir/${n}`)).size;
  console.log('bytes', total);
  const handle = await fsp.open('dir/handle.txt', 'w+');
  await handle.write('0123456789', 0);
  await handle.write('ab', 4);
  await handle.sync();
  const buf = Buffer.alloc(10);
  await handle.read(buf, 0, 10, 0);
  await handle.close();
  console.log('positioned writes:', buf.toString());
  await new Promise((resolve, reject) => {
    const out = fs.createWriteStream('dir/stream.txt');
    out.on('error', reject);
    out.on('finish', resolve);
    for (let i = 0; i < 1000; i++) out.write(`line ${i}\n`);
    out.end();
  });
  const lines = fs.readFileSync('dir/stream.txt', 'utf8').split('\n').length - 1;
  console.log('stream lines', lines);
}

// Each step makes a change and waits for the first event naming the file
// it expects; events left from earlier steps name other files.
function watchPart() {
  console.log('== fs.watch');
  fs.mkdirSync('watched');
  fs.writeFileSync('watched/existing.txt', 'before\n');
  const steps = [
    ['create new.txt', 'new.txt', () => fs.writeFileSync('watched/new.txt', 'new\n')],
    ['rename new.txt to moved.txt', 'moved.txt', () => fs.renameSync('watched/new.txt', 'watched/moved.txt')],
    ['append to existing.txt', 'existing.txt', () => fs.appendFileSync('watched/existing.txt', 'after\n')],
    ['make directory subdir', 'subdir', () => fs.mkdirSync('watched/subdir')],
    ['unlink moved.txt', 'moved.txt', () => fs.unlinkSync('watched/moved.txt')],
  ];
  return new Promise((resolve, reject) => {
    const watcher = fs.watch('watched');
    let current = -1;
    const hang = setTimeout(() => reject(new Error(`no event for step ${current}`)), 120000);
    const next = () => {
      current++;
      if (current === steps.length) {
        clearTimeout(hang);
        watcher.close();
        resolve();
        return;
      }
      steps[current][2]();
    };
    watcher.on('error', reject);
    watcher.on('change', (type, name) => {
      if (current >= 0 && current < steps.length && name === steps[current][1]) {
        console.log(`${steps[current][0]}: ${type} ${name}`);
        next();
      }
    });
    next();
  });
}

asyncPart()
  .then(watchPart)
  .then(() => {
    fs.rmSync('dir', { recursive: true });
    fs.rmSync('watched', { recursive: true });
    console.log('left:', listing('.'));
  })
  .catch((e) => {
    console.error('failed:', e);
    process.exit(1);
  });
