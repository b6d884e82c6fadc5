#!/usr/bin/env bash
# Run public third-party dd test suites against GNU dd and against ddx.
#
# Usage: tests/third_party/run.sh SUITE_DIR [SUITE_DIR...]
#
# Each SUITE_DIR is an unpacked copy of a third-party source tree, kept OUTSIDE
# this repository (see tests/third_party/README.md for where to get them):
#   - a toybox tree   (has scripts/runtest.sh and tests/dd.test)
#   - a busybox tree  (has testsuite/dd/), or its testsuite/ directory itself
#   - a GNU coreutils tree (has init.cfg, tests/init.sh and tests/dd/)
# The kind is detected from the directory layout.
#
# Both implementations are exposed to the suite as a program called "dd": a
# symlink named dd in a fresh temp dir that is prepended to PATH.
#
# Environment:
#   GNU_DD   reference dd            (default: dd found on PATH, must be GNU)
#   DDX      binary under test       (default: <repo>/target/release/ddx)
#   TEST_TIMEOUT   seconds per test command / test script (default 60)
#   SUITE_TIMEOUT  seconds per suite run per implementation (default 900)
#   KEEP=1   keep the scratch directory
#
# Exit status: 0 if every test GNU dd passes also passes with ddx,
#              1 if some such test fails with ddx (or ddx is missing),
#              2 on usage / setup errors.

set -u
export LC_ALL=C LANG=C
unset LANGUAGE POSIXLY_CORRECT

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)

if [ $# -lt 1 ]; then
  sed -n '2,/^$/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
  exit 2
fi

GNU_DD=${GNU_DD:-$(type -P dd)}
DDX=${DDX:-$root/target/release/ddx}
SUITE_TIMEOUT=${SUITE_TIMEOUT:-900}
TEST_TIMEOUT=${TEST_TIMEOUT:-60}
export TEST_TIMEOUT

if [ -z "$GNU_DD" ] || ! "$GNU_DD" --version 2>/dev/null | head -n1 | grep -q 'coreutils'; then
  echo "run.sh: GNU dd not found (GNU_DD=$GNU_DD)" >&2
  exit 2
fi
GNU_DD=$(readlink -f "$GNU_DD")
if [ -e "$DDX" ] && [ "$GNU_DD" = "$(readlink -f "$DDX")" ]; then
  echo "run.sh: GNU_DD and DDX are the same file ($GNU_DD); set GNU_DD" >&2
  exit 2
fi

scratch=$(mktemp -d "${TMPDIR:-/tmp}/ddx-third-party.XXXXXX")
if [ -z "${KEEP:-}" ]; then
  trap 'rm -rf "$scratch"' EXIT
else
  echo "scratch dir: $scratch"
fi

# ---------------------------------------------------------------- suite kinds

suite_kind() {
  local d=$1
  if [ -f "$d/scripts/runtest.sh" ] && [ -f "$d/tests/dd.test" ]; then
    echo toybox
  elif [ -d "$d/testsuite/dd" ]; then
    echo busybox
  elif [ -d "$d/dd" ] && [ -f "$d/runtest" ]; then
    echo busybox-testsuite
  elif [ -f "$d/init.cfg" ] && [ -f "$d/tests/init.sh" ] && [ -d "$d/tests/dd" ]; then
    echo coreutils
  else
    echo unknown
  fi
}

# Each runner: run_<kind> SUITE_DIR WORKDIR LOG RESULTS
#   runs the suite with the current PATH (whose first entry holds "dd"),
#   writes the raw harness output to LOG and "STATUS<TAB>NAME" lines to RESULTS
#   (STATUS is PASS, FAIL or SKIP).

# toybox: replicate scripts/test.sh's do_test() for TEST_HOST=1 (the upstream
# driver itself wants ./configure and a C compiler; the test logic lives in
# scripts/runtest.sh and tests/dd.test, which are used unmodified).
run_toybox() {
  local suite=$1 work=$2 log=$3 results=$4
  mkdir -p "$work/testdir"
  (
    cd "$work/testdir" || exit 1
    export TEST_HOST=1 VERBOSE=all FILES="$suite/tests/files" TESTDIR="$work"
    export LC_COLLATE=C
    unset DEBUG SKIP OPTIONFLAGS NOSPACE IS_TOYBOX
    # runtest.sh runs each test command as ${EVAL:-eval --} "$cmd"; run it in
    # a child bash under a timeout instead, so one hung dd cannot stall the
    # rest of the file (the command strings are self-contained).
    export EVAL="timeout -k 5 $TEST_TIMEOUT bash -c"
    CMDNAME=dd
    C=$(type -P dd)
    # shellcheck disable=SC1091
    source "$suite/scripts/runtest.sh"
    (. "$suite/tests/dd.test"; cd "$TESTDIR"; echo "$FAILCOUNT" > continue)
  ) </dev/null >"$log" 2>&1
  # Lines look like "PASS: dd count=2"; names can repeat in principle, so
  # disambiguate duplicates with #N.
  awk '/^(PASS|FAIL|SKIP): dd / {
         st = substr($1, 1, 4); name = $0; sub(/^[A-Z]+: /, "", name)
         n[name]++; if (n[name] > 1) name = name " #" n[name]
         print st "\ttoybox: " name }' "$log" >"$results"
  if [ ! -e "$work/continue" ]; then
    echo "ABORTED: toybox dd.test did not run to completion" >>"$log"
  fi
}

# busybox: old-style tests in testsuite/dd/*, run like testsuite/runtest's
# run_applet_testcase() ("sh -x -e TESTCASE" in a scratch dir). They invoke
# "busybox dd ..."; a "busybox" shim that just execs its arguments makes that
# resolve to the dd on PATH.
run_busybox() {
  local suite=$1 work=$2 log=$3 results=$4 tsdir
  if [ -d "$suite/testsuite/dd" ]; then tsdir=$suite/testsuite; else tsdir=$suite; fi
  local shimdir=$work/shim
  mkdir -p "$shimdir"
  printf '#!/bin/sh\nexec "$@"\n' >"$shimdir/busybox"
  chmod +x "$shimdir/busybox"
  : >"$results"
  : >"$log"
  local tc name st
  for tc in "$tsdir"/dd/*; do
    name=${tc##*/}
    case $name in .*|*~|\#*) continue ;; esac
    rm -rf "$work/tmp" && mkdir -p "$work/tmp"
    st=PASS
    ( cd "$work/tmp" && PATH="${PATH%%:*}:$shimdir:${PATH#*:}" d="$tsdir" \
        sh -x -e "$tc" ) </dev/null >"$work/out.txt" 2>&1 || st=FAIL
    { echo "$st: busybox: $name"; [ $st = FAIL ] && sed 's/^/    /' "$work/out.txt"; } >>"$log"
    printf '%s\tbusybox: %s\n' "$st" "$name" >>"$results"
  done
}

# coreutils: GNU coreutils' own tests/dd/*.sh and *.pl, run the way its
# tests/local.mk runs them (TESTS_ENVIRONMENT + init.sh), but in a scratch
# "build tree" whose src/ holds only the dd under test: init.sh's
# "path_prepend_ ./src" then puts it first on PATH. Every other program a test
# uses comes from the system. Exit 0 = PASS, 77 = SKIP, anything else = FAIL.
run_coreutils() {
  local suite=$1 work=$2 log=$3 results=$4
  local top=$work/top
  mkdir -p "$top/src"
  ln -s "$suite/tests" "$top/tests"
  ln -s "$suite/init.cfg" "$top/init.cfg"
  ln -s "$(type -P dd)" "$top/src/dd"
  # stderr.sh runs "$abs_top_builddir/src/test"; use the system's.
  ln -s "$(type -P test)" "$top/src/test"
  # getlimits is a helper coreutils builds but does not install; provide the
  # values the dd tests use (LP64 Linux).
  cat >"$top/src/getlimits" <<'LIMITS'
#!/bin/sh
echo INT_MAX=2147483647
echo INT_OFLOW=2147483648
echo INT_MIN=-2147483648
echo INT_UFLOW=-2147483649
echo UINT_MAX=4294967295
echo UINT_OFLOW=4294967296
for t in OFF_T SSIZE LONG INTMAX; do
  echo ${t}_MAX=9223372036854775807
  echo ${t}_OFLOW=9223372036854775808
  echo ${t}_MIN=-9223372036854775808
  echo ${t}_UFLOW=-9223372036854775809
done
for t in SIZE ULONG UINTMAX; do
  echo ${t}_MAX=18446744073709551615
  echo ${t}_OFLOW=18446744073709551616
done
LIMITS
  chmod +x "$top/src/getlimits"
  [ "$(getconf LONG_BIT)" = 64 ] || echo "WARNING: getlimits shim assumes 64-bit" >>"$log"
  : >"$results"
  : >"$log"
  local t st rc out=$work/out.txt
  for t in $(cd "$suite" && ls tests/dd/*.sh tests/dd/*.pl | LC_ALL=C sort); do
    # skip-seek-past-dev.sh, when run as root, points dd (count=0) at the
    # block device holding the current directory. Don't let an unfinished dd
    # near a real disk unless asked to.
    if [ "${t##*/}" = skip-seek-past-dev.sh ] && [ "$(id -u)" = 0 ] &&
       [ "${RUN_DEVICE_TESTS:-}" != yes ]; then
      printf 'SKIP: coreutils: %s\n    not run: root + real block device; set RUN_DEVICE_TESTS=yes\n' "$t" >>"$log"
      printf 'SKIP\tcoreutils: %s\n' "$t" >>"$results"
      continue
    fi
    (
      cd "$top" || exit 99
      . tests/lang-default
      tmp__=${TMPDIR-/tmp}
      test -d "$tmp__" && test -w "$tmp__" || tmp__=.
      . tests/envvar-check
      TMPDIR=$tmp__; export TMPDIR
      export VERSION=9.1 PACKAGE_VERSION=9.1 \
        abs_top_builddir="$top" abs_top_srcdir="$top" abs_srcdir="$top" \
        built_programs="dd printf truncate" fail=0 host_os=linux-gnu \
        host_triplet="$(uname -m)-pc-linux-gnu" srcdir=. top_srcdir=. \
        CONFIG_HEADER=/dev/null CU_TEST_NAME="top,${t//\//-}" \
        CC=cc AWK=awk EGREP='grep -E' EXEEXT= MAKE=make PERL=perl \
        SHELL=/bin/sh VERBOSE=yes
      case $t in
        # tests/local.mk ends TESTS_ENVIRONMENT with "9>&2": init.sh reports
        # skips and framework failures on fd 9.
        *.sh) exec timeout -k 5 "$TEST_TIMEOUT" /bin/sh "$t" 9>&2 ;;
        *.pl) exec timeout -k 5 "$TEST_TIMEOUT" \
                perl -w -Itests -MCuSkip -MCoreutils -M"CuTmpdir qw($t)" "$t" 9>&2 ;;
      esac
    ) </dev/null >"$out" 2>&1
    rc=$?
    case $rc in 0) st=PASS ;; 77) st=SKIP ;; *) st=FAIL ;; esac
    [ $rc = 124 ] || [ $rc = 137 ] && echo "TIMEOUT after ${TEST_TIMEOUT}s" >>"$out"
    {
      echo "$st: coreutils: $t"
      if [ $st = FAIL ]; then
        echo "    (exit status $rc; shell trace from print_ver_ on)"
        if grep -q 'print_ver_' "$out"; then
          sed -n '/print_ver_/,$p' "$out" | sed 's/^/    /'
        else
          sed 's/^/    /' "$out"
        fi
      fi
      if [ $st = SKIP ]; then grep 'skipped test' "$out" | tail -n 2 | sed 's/^/    /'; fi
    } >>"$log"
    printf '%s\tcoreutils: %s\n' "$st" "$t" >>"$results"
  done
}

# -------------------------------------------------------------- run one impl

# run_impl LABEL BINARY -> fills $scratch/LABEL/{results,log.*}
run_impl() {
  local label=$1 bin=$2 dir=$scratch/$1
  mkdir -p "$dir/bin"
  ln -s "$bin" "$dir/bin/dd"
  : >"$dir/results"
  local PATH="$dir/bin:$PATH"
  export PATH

  # Probe: what does a suite see when it runs "dd"?
  local seen seen_real ver
  seen=$(type -P dd)
  seen_real=$(readlink -f "$seen")
  ver=$(dd --version 2>&1 | head -n1)
  printf '[%s] dd on PATH: %s -> %s\n[%s] dd --version: %s\n' \
    "$label" "$seen" "$seen_real" "$label" "$ver"
  if [ "$seen_real" != "$(readlink -f "$bin")" ]; then
    echo "[$label] ERROR: suite would run $seen_real, not $bin" >&2
    return 2
  fi

  local s kind i=0
  for s in "${suites[@]}"; do
    i=$((i + 1))
    kind=$(suite_kind "$s")
    case $kind in busybox-testsuite) kind=busybox ;; esac
    mkdir -p "$dir/work$i"
    timeout --kill-after=10 "$SUITE_TIMEOUT" bash -c '"$@"' _ \
        "run_$kind" "$s" "$dir/work$i" "$dir/log.$i" "$dir/res.$i"
    local rc=$?
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
      echo "TIMEOUT: $kind suite exceeded ${SUITE_TIMEOUT}s" >>"$dir/log.$i"
    fi
    [ -f "$dir/res.$i" ] && cat "$dir/res.$i" >>"$dir/results"
    cat "$dir/log.$i" >>"$dir/log" 2>/dev/null
  done
}

export -f run_toybox run_busybox run_coreutils

# ------------------------------------------------------------------- main

suites=()
for s in "$@"; do
  s=$(cd "$s" 2>/dev/null && pwd) || { echo "run.sh: no such directory: $s" >&2; exit 2; }
  if [ "$(suite_kind "$s")" = unknown ]; then
    echo "run.sh: $s is not a toybox, busybox or coreutils tree (see README.md)" >&2
    exit 2
  fi
  suites+=("$s")
  echo "suite: $(suite_kind "$s") at $s"
done

run_impl gnu "$GNU_DD" || exit 2

have_ddx=1
if [ ! -x "$DDX" ]; then
  echo "[ddx] binary $DDX not found (run: cargo build --release)" >&2
  have_ddx=0
  : >"$scratch/ddx-missing"
  mkdir -p "$scratch/ddx" && : >"$scratch/ddx/results" && : >"$scratch/ddx/log"
else
  run_impl ddx "$(readlink -f "$DDX")" || exit 2
fi

# ----------------------------------------------------------------- report

echo
printf '%-6s %-6s %s\n' "GNU" "ddx" "test"
# Join on the test name, keeping GNU's order; tests ddx never reported are MISSING.
awk -F'\t' '
  FNR == NR { ddx[$2] = $1; next }
  { d = ($2 in ddx) ? ddx[$2] : "MISSING"; printf "%-6s %-6s %s\n", $1, d, $2 }
' "$scratch/ddx/results" "$scratch/gnu/results" >"$scratch/table"
cat "$scratch/table"

n=$(awk '$1 == "PASS"' "$scratch/table" | wc -l)
m=$(awk '$1 == "PASS" && $2 == "PASS"' "$scratch/table" | wc -l)
failing=$(awk '$1 == "PASS" && $2 != "PASS" { $1 = ""; $2 = ""; sub(/^ +/, ""); print }' \
          "$scratch/table")
# Tests ddx fails on purpose, each with the reason. Counted apart, not as
# failures: a change of behaviour here must be a decision, written down.
declare -A deliberate=(
  ["toybox: dd if=file of=file (same file)"]="the wrong-device guard refuses to truncate a file it is about to read (GNU empties it; --force gives GNU's result)"
)
deliberate_hits=''
if [ -n "$failing" ]; then
  kept=''
  while IFS= read -r t; do
    if [ -n "${deliberate[$t]+set}" ]; then
      deliberate_hits+="  $t: ${deliberate[$t]}"$'\n'
    else
      kept+="$t"$'\n'
    fi
  done <<<"$failing"
  failing=${kept%$'\n'}
fi
gnu_fail=$(awk '$1 != "PASS" && $1 != "SKIP"' "$scratch/table" | wc -l)
skipped=$(awk '$1 == "SKIP"' "$scratch/table" | wc -l)

if [ -n "$failing" ] && [ $have_ddx = 1 ]; then
  echo
  echo "=== details of tests GNU dd passes but ddx fails (harness output with ddx) ==="
  while IFS= read -r t; do
    echo "--- $t"
    # Print the block for this test from ddx's log: from its status line up
    # to the next status line.
    awk -v t="$t" '
      function strip(s) { sub(/^(PASS|FAIL|SKIP): /, "", s); if (s ~ /^dd /) s = "toybox: " s; return s }
      /^(PASS|FAIL|SKIP): / { inblk = (strip($0) == t) ; if (inblk) { print; next } }
      inblk { print }
    ' "$scratch/ddx/log"
  done <<<"$failing"
  grep -h -E '^(TIMEOUT|ABORTED):' "$scratch/ddx/log" 2>/dev/null
fi

echo
echo "GNU dd: $n passed, $gnu_fail failed, $skipped skipped (failures/skips with GNU dd are not counted)"
grep -h -E '^(TIMEOUT|ABORTED):' "$scratch/gnu/log" 2>/dev/null | sed 's/^/GNU dd: /'
# Per-suite breakdown (the part of the name before the first ':').
awk '{ split($0, a, ": "); k = a[1]; sub(/^[A-Z]+ +[A-Z]+ +/, "", k)
       if ($1 == "PASS") { n[k]++; if ($2 == "PASS") m[k]++ } else n[k] += 0
       order[k] = order[k] ? order[k] : ++c }
     END { for (k in order) idx[order[k]] = k
           for (i = 1; i <= c; i++) { k = idx[i]
             printf "  %-10s %d passed by dd, of which %d passed by ddx\n", k ":", n[k], m[k] } }' \
  "$scratch/table"
if [ $have_ddx = 0 ]; then
  echo "third-party: $n passed by dd, of which 0 passed by ddx; failing: (ddx binary not built: $DDX)"
  exit 1
fi
if [ -n "$failing" ]; then
  failing_list=$(printf '%s\n' "$failing" | paste -sd';' - | sed 's/;/; /g')
else
  failing_list=none
fi
if [ -n "$deliberate_hits" ]; then
  echo "deliberately different (not counted as failures):"
  printf '%s' "$deliberate_hits"
fi
echo "third-party: $n passed by dd, of which $m passed by ddx; failing: $failing_list"
[ -z "$failing" ]
