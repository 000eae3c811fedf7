#!/bin/sh
# git init, add, commit, branch, merge, tag, stash, gc and log under WORK,
# with fixed names and dates so that commit hashes are the same every run.
# Usage: git.sh WORK
set -eu
work=$1
mkdir -p "$work"
cd "$work"
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
export GIT_AUTHOR_NAME='Ada Tester' GIT_AUTHOR_EMAIL=ada@example.com
export GIT_COMMITTER_NAME='Cy Committer' GIT_COMMITTER_EMAIL=cy@example.com
# Runs "$@" as of the date $1 (author and committer).
at() {
    GIT_AUTHOR_DATE=$1 GIT_COMMITTER_DATE=$1
    export GIT_AUTHOR_DATE GIT_COMMITTER_DATE
    shift
    "$@"
}
git init -q -b main repo
cd repo
mkdir -p src docs
printf 'cordon test repository\n' > README
seq 1 200 > src/numbers.txt
printf 'first\n' > docs/notes.txt
git add -A
at '2024-01-02T10:00:00+0000' git commit -q -m 'Initial commit'
git branch feature
git checkout -q feature
seq 201 220 >> src/numbers.txt
git mv README README.md
printf '#!/bin/sh\necho tool\n' > src/tool.sh
chmod 755 src/tool.sh
git add -A
at '2024-01-03T11:30:00+0100' git commit -q -m 'feature: more numbers, a tool, README.md'
git checkout -q main
printf 'second\n' >> docs/notes.txt
at '2024-01-04T09:15:00-0500' git commit -q -am 'main: a second note'
at '2024-01-05T12:00:00+0000' git merge -q --no-ff -m 'Merge branch feature' feature
at '2024-01-05T12:05:00+0000' git tag -a v1.0 -m 'version 1.0'
printf 'work in progress\n' >> docs/notes.txt
at '2024-01-06T08:00:00+0000' git stash -q
echo "stashed: $(git stash list)"
git stash pop -q
git status --porcelain
git checkout -q -- docs/notes.txt
echo "log:"
git log --graph --format='%h %an <%ae> %ad | %cn %cd | %s' --date=iso-strict
echo "hashes:"
git rev-parse HEAD main feature v1.0 HEAD^{tree}
git ls-files -s
git cat-file -p HEAD
git describe
git fsck --strict --no-progress && echo "fsck ok"
git gc -q
git count-objects -v | grep -E '^(count|in-pack|packs):'
git fsck --strict --no-progress && echo "fsck after gc ok"
git log --format=%H | wc -l
