#!/bin/sh
# A tree with files, links, modes and dates, archived with `tar cJf` and
# extracted with `tar xJf` under WORK; the archive's and every file's
# checksums must be the same as natively, and the copy equal to the source.
# Usage: tar.sh WORK
set -eu
work=$1
mkdir -p "$work"
cd "$work"
umask 022
export XZ_OPT=-T1  # one block layout whatever the CPU count
mkdir -p src/a/b src/empty
seq 1 100000 > src/numbers.txt
yes 'the same line again' | head -n 50000 > src/a/repeated.txt
head -c 1048576 /dev/zero > src/a/b/zeros.bin
gzip -n -c src/numbers.txt > src/a/numbers.gz
printf '#!/bin/sh\necho run\n' > src/a/run.sh
chmod 755 src/a/run.sh
printf 'secret\n' > src/a/private
chmod 600 src/a/private
: > src/a/b/empty-file
ln -s ../numbers.txt src/a/link
ln src/numbers.txt src/hardlink.txt
find src -exec touch -h -d '2020-02-03 04:05:06 UTC' {} +
touch -d '2019-01-01 00:00:00 UTC' src/a/numbers.gz
tar --sort=name --owner=0 --group=0 --numeric-owner -cJf tree.tar.xz -C src .
sha256sum tree.tar.xz
tar -tvJf tree.tar.xz
mkdir out
tar -xJf tree.tar.xz -C out
# Sizes of directories depend on the file system: only those of the rest.
(cd out && find . -printf '%p %y %m %s %n %TY-%Tm-%Td %TT %l\n' | awk '$2 == "d" { $4 = "-" } 1' | sort)
(cd src && find . -type f | sort | xargs sha256sum) > src.sums
(cd out && sha256sum -c --quiet ../src.sums) && echo "every file checksum matches"
cat src.sums
diff -r src out && echo "trees equal"
# The same round trip through pipes.
mkdir piped
tar -cf - -C src . | xz -9 | xz -d | tar -xf - -C piped
diff -r src piped && echo "piped copy equal"
rm -r out piped
ls
