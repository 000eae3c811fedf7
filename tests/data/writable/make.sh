#!/bin/sh
# Builds the multi-file C project of tests/data/cproject under WORK with
# `make -j2` and runs it; then rebuilds after an edit, which must remake only
# what depends on the edited file.
# Usage: make.sh WORK PROJECT_DIR
set -eu
work=$1
project=$2
mkdir -p "$work"
cd "$work"
cp -R "$project" proj
cd proj
make -s -j2
./prog
ls
echo "second make, nothing to do:"
make -j2 | sed 's/^make: Nothing to be done.*/(nothing to be done)/'
# Sources dated before the products, then one source edited (sed -i writes
# a new file and renames it over the old one): only main.o and prog are
# made again. Fixed dates keep the order of times independent of how fast
# the build went.
touch -d '2001-02-03 04:05:06' Makefile ./*.c crc.h words.h store.h
touch -d '2002-02-03 04:05:06' ./*.o libtools.a prog gentable crc_table.h
sed -i 's/hello from a multi-file build/hello after an edit/' main.c
echo "after editing main.c:"
make -j2 CFLAGS='-O2 -Wall -Wextra'
./prog other.out
wc -c text.out other.out
make -s clean
ls
