#!/usr/bin/env bash
# Passthrough copies against their peers, side by side in one emulated
# machine (the guest of tests/all/rigs/guest.rs: QEMU, TCG, Debian's
# kernel from .ci/guest-kit), on a virtio-scsi disk and an NVMe namespace
# of SIZE_MiB each (images on /dev/shm):
#  1. SCSI generic, reading the whole disk into /dev/null:
#       ddx if=/dev/sg0 of=/dev/null bs=64k            (its default depth)
#     against sgp_dd if=/dev/sg0 of=/dev/null bs=512 bpt=128 thr=4
#     and the same writing the disk from /dev/zero.
#     Bar: ddx's time <= 1.0x sgp_dd's.
#  2. NVMe generic, reading the whole namespace into /dev/null:
#       ddx if=/dev/ng0n1 of=/dev/null bs=64k --queue-depth=QD
#     against fio --ioengine=io_uring_cmd --cmd_type=nvme --rw=read
#     --bs=64k --iodepth=QD (default QD 8), and the same writing.
#     Bar: ddx's throughput >= 0.9x fio's.
#  3. ddx bench on each generic node (/dev/sg0, /dev/ng0n1), row by row
#     of its summary (SEQ Q8T1, SEQ Q1T1, RND4K Q32T1, RND4K Q1T1, read
#     and write; the sequential rows at one command's worth per request),
#     beside fio with the options ddx's JSON names for each cell: fio's sg
#     engine on the sg node, its io_uring_cmd engine on the ng node, the
#     same request size, depth and working set. A cell ddx skips (the sg
#     driver keeps at most 16 commands in flight) is listed with why.
#     On the sg node ddx moves the data in the driver's reserve buffers,
#     mapped, which fio's sg engine cannot do: there each cell carries the
#     same requests made fio's way (the driver copying each buffer), and
#     that figure is the one held to the bar; the cell's own ratio to fio
#     is printed beside it with the reason it is not held.
#     Bars, as bench/bench-vs-fio.sh's: sequential bandwidth within 10% of
#     fio's, random IOPS within 15%. Each cell is also measured by fio at
#     its lightest (--gtod_reduce=1; with io_uring_cmd, --fixedbufs=1
#     --registerfiles=1), to show how much of a gap is fio's own cost per
#     request. A cell outside its bar passes only where ddx's report says,
#     beside it, why none of its figures is the device's own (an emulated
#     CPU: summary.not_the_device).
# Each figure is taken ROUNDS times (default 5), ddx and its peer back to
# back in alternating order; the verdict is the median of the per-round
# ratios, printed with their spread (lowest-highest) and every round's.
# The emulated machine's absolute speed means nothing: only the ratios do.
#
# usage (root): bench/passthrough.sh [SIZE_MiB] (default 256). KIT= the
# guest kit (default /opt/ddx-guest; bash .ci/guest-kit makes it).
# PARTS=copy,bench picks the parts (copy: 1 and 2; bench: 3); TIME= the
# seconds of a random run in part 3 (default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "bench/passthrough.sh needs root"; exit 1; }
size_mib=${1:-256}
rounds=${ROUNDS:-5}
qd=${QD:-8}
parts=${PARTS:-copy,bench}
time_s=${TIME:-2}
kit=${KIT:-/opt/ddx-guest}
[ -f "$kit/ready" ] || { echo "no guest kit in $kit: run bash .ci/guest-kit"; exit 1; }
version=$(cat "$kit/ready")
ddx=$(realpath "${DDX:-target/release/ddx}")
[ -x "$ddx" ] || cargo build --release -q

dir=$(mktemp -d /dev/shm/ddx-passthrough.XXXXXX)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/share" "$dir/root/bin" "$dir/root/lib/modules" "$dir/root/proc" \
  "$dir/root/sys" "$dir/root/dev" "$dir/root/host"

# The initramfs, as the test rig builds it: busybox, the disks' modules
# with what they need (modules.dep lists each one's closure, the last to
# load first), and an /init that chroots into the host's root.
modules=$kit/kernel/lib/modules/$version
cp /bin/busybox "$dir/root/bin/busybox"
loads=
for module in kernel/drivers/virtio/virtio_pci.ko kernel/drivers/scsi/virtio_scsi.ko \
  kernel/drivers/scsi/sd_mod.ko kernel/drivers/scsi/sg.ko kernel/drivers/nvme/host/nvme.ko \
  kernel/net/9p/9pnet_virtio.ko kernel/fs/9p/9p.ko; do
  for m in $(grep "^$module:" "$modules/modules.dep" | cut -d: -f2 | tr ' ' '\n' | tac) "$module"; do
    name=$(basename "$m")
    [ -e "$dir/root/lib/modules/$name" ] && continue
    cp "$modules/$m" "$dir/root/lib/modules/$name"
    loads="$loads
insmod /lib/modules/$name"
  done
done
cat >"$dir/root/init" <<EOF
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
$loads
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000 host /host || poweroff -f
mount -t proc proc /host/proc
mount -t sysfs sys /host/sys
mount -t devtmpfs dev /host/dev
mount -t tmpfs tmp /host/tmp
mkdir /host/tmp/out
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 out /host/tmp/out
chroot /host /bin/sh /tmp/out/run.sh
umount /host/tmp/out
poweroff -f
EOF
chmod +x "$dir/root/init"
(cd "$dir/root" && find . | /bin/busybox cpio -o -H newc 2>/dev/null) >"$dir/initramfs"
truncate -s "${size_mib}M" "$dir/scsi.img" "$dir/nvme.img"

cat >"$dir/share/run.sh" <<EOF
export PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C
ddx=$ddx
size_mib=$size_mib
rounds=$rounds
qd=$qd
parts=$parts
time_s=$time_s
EOF
cat >>"$dir/share/run.sh" <<'EOF'
exec >/tmp/out/report.txt 2>&1
# Every program from the guest's tmpfs, not over 9p: a copy's time is
# the copy's, not the loading of its binary.
cp "$ddx" /tmp/ddx; cp "$(command -v sgp_dd)" /tmp/sgp_dd
# The median of the ratios given, and their spread: "0.8123 (spread 0.74-0.91)".
summary() { tr ' ' '\n' | grep . | sort -g | awk '{ a[NR] = $1 } END { m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2; printf "%.4f (spread %.2f-%.2f)\n", m, a[1], a[NR] }'; }
blocks=$((size_mib * 2048))
# Each side's own account of its copy: ddx's statistics (seconds, from
# before its ends are opened), sgp_dd's time=1 line (seconds), fio's
# bandwidth (bytes per second, its JSON).
ddx_secs() { /tmp/ddx "$@" 2>&1 >/dev/null | sed -n 's/.* copied, \([0-9.e-]*\) s,.*/\1/p'; }
sgp_secs() { /tmp/sgp_dd "$@" time=1 2>&1 | sed -n 's/.*time to transfer data was \([0-9.]*\) secs.*/\1/p'; }
fio_bw() { fio --name=x --ioengine=io_uring_cmd --cmd_type=nvme --filename=/dev/ng0n1 \
  --rw="$1" --bs=64k --iodepth="$qd" --size=100% --output-format=json 2>/dev/null |
  tr -d ' \n' | sed 's/.*"'"$1"'":{"io_bytes":[0-9]*,"io_kbytes":[0-9]*,"bw_bytes":\([0-9]*\).*/\1/'; }
echo "guest: $(nproc) CPUs, $size_mib MiB disks, $rounds rounds, queue depth $qd for NVMe"
status=0

copy=0
case ",$parts," in *,copy,*) copy=1 ;; esac
[ "$copy" = 0 ] || for dir in read write; do
  ratios=
  for round in $(seq "$rounds"); do
    if [ "$dir" = read ]; then
      set -- if=/dev/sg0 of=/dev/null
    else
      set -- if=/dev/zero of=/dev/sg0
    fi
    if [ $((round % 2)) -eq 1 ]; then
      ta=$(ddx_secs "$@" bs=64k count=$((size_mib * 16)))
      tb=$(sgp_secs "$@" bs=512 bpt=128 thr=4 count=$blocks)
    else
      tb=$(sgp_secs "$@" bs=512 bpt=128 thr=4 count=$blocks)
      ta=$(ddx_secs "$@" bs=64k count=$((size_mib * 16)))
    fi
    ratios="$ratios $(awk -v a="$ta" -v b="$tb" 'BEGIN { printf "%.4f", a / b }')"
    echo "sg $dir round $round: ddx $ta s, sgp_dd thr=4 $tb s"
  done
  echo "sg $dir: median ddx/sgp_dd time ratio $(echo $ratios | summary) (bar <= 1.0)"
done

[ "$copy" = 0 ] || for dir in read write; do
  ratios=
  for round in $(seq "$rounds"); do
    if [ "$dir" = read ]; then
      set -- if=/dev/ng0n1 of=/dev/null
    else
      set -- if=/dev/zero of=/dev/ng0n1
    fi
    if [ $((round % 2)) -eq 1 ]; then
      ta=$(ddx_secs "$@" bs=64k count=$((size_mib * 16)) --queue-depth="$qd"); fb=$(fio_bw "$dir")
    else
      fb=$(fio_bw "$dir"); ta=$(ddx_secs "$@" bs=64k count=$((size_mib * 16)) --queue-depth="$qd")
    fi
    db=$(awk -v s="$ta" -v m="$size_mib" 'BEGIN { printf "%.0f", m * 1048576 / s }')
    ratios="$ratios $(awk -v a="$db" -v b="$fb" 'BEGIN { printf "%.4f", a / b }')"
    echo "ng $dir round $round: ddx $db B/s, fio io_uring_cmd $fb B/s"
  done
  echo "ng $dir: median ddx/fio throughput ratio $(echo $ratios | summary) (bar >= 0.9)"
done

case ",$parts," in *,bench,*) ;; *) echo $status >/tmp/out/status; exit $status ;; esac
cat >/tmp/vs-fio.py <<'PY'
import json, statistics, subprocess, sys
ddx, size_mib, rounds, time_s = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
ramp_ms = max(1, round(time_s * 250))
ok = True
LIGHT = ["--gtod_reduce=1"]

def ddx_bench(node):
    out = subprocess.run([ddx, "bench", node, "--destructive", f"--size={size_mib}M", "--runs=1",
                          "--tests=seq-read,seq-write,qd-sweep", f"--time-per-run={time_s}", "--json"],
                         check=True, capture_output=True).stdout
    return json.loads(out)

def fio(options, op, sequential):
    # The same warm-up ddx gives itself (a quarter of a sequential pass,
    # a quarter of a random run), thrown away.
    if sequential:
        warm = [o for o in options if not o.startswith("--size=")]
        warm.append(f"--size={(size_mib << 20) // 4}")
        subprocess.run(["fio", "--name=warmup", *warm, "--output=/dev/null"], check=True)
        extra = []
    else:
        extra = [f"--ramp_time={ramp_ms}ms"]
    subprocess.run(["fio", "--name=vs", *options, *extra, "--output-format=json",
                    "--output=/tmp/fio.json"], check=True, capture_output=True)
    job = json.load(open("/tmp/fio.json"))["jobs"][0]
    # Its figure, and the CPU its job took (% of one CPU): in an emulated
    # machine the CPU a tool spends per request is what limits it.
    cpu = job["usr_cpu"] + job["sys_cpu"]
    return (job[op]["bw_bytes"] if sequential else job[op]["iops"]), cpu

def cpu_of(report, row, op, mode):
    """The CPU (% of one CPU) of the detail figure a summary cell shows."""
    cell = row[op]
    for r in report["results"]:
        if (r["test"], r["mode"], r["op"], r["queue_depth"], r["pattern"]) == \
                (cell["test"], mode, op, row["queue_depth"], row["pattern"]) \
                and r["offset"] is None and r["throughput_measure"] == "run":
            return r["cpu_percent"]
    return float("nan")

def spread(ratios):
    return (f"{statistics.median(ratios):.3f} (spread {min(ratios):.2f}-{max(ratios):.2f}; "
            f"rounds {' '.join(f'{r:.2f}' for r in ratios)})")

for node in ["/dev/sg0", "/dev/ng0n1"]:
    first = ddx_bench(node)
    cells = [(row["name"], op, row[op]) for row in first["summary"]["rows"] for op in ("read", "write")]
    mine = {(name, op): [] for name, op, _ in cells}
    ways = {(name, op): [] for name, op, _ in cells}
    theirs = {(name, op): [] for name, op, _ in cells}
    # fio again with the least it spends per request of its own (no clock
    # reads for latency statistics; io_uring_cmd's buffers registered
    # once): how much of a gap is fio's own cost, not the device's.
    light = {(name, op): [] for name, op, _ in cells}
    cpu = {}
    for i in range(rounds):
        def ddx_side(report=None):
            report = report or ddx_bench(node)
            for row in report["summary"]["rows"]:
                sequential = row["pattern"] == "sequential"
                key = "throughput_bytes_per_sec" if sequential else "iops"
                for op in ("read", "write"):
                    cell = row[op]
                    if cell["throughput_bytes_per_sec"] is not None:
                        mine[(row["name"], op)].append(cell[key])
                        cpu.setdefault(("ddx", row["name"], op), []).append(
                            cpu_of(report, row, op, cell["mode"]))
                    if cell.get("fio_way") is not None:
                        ways[(row["name"], op)].append(cell["fio_way"][key])
                        cpu.setdefault(("way", row["name"], op), []).append(
                            cpu_of(report, row, op, cell["fio_way"]["mode"]))
        def fio_side():
            for name, op, cell in cells:
                if cell["throughput_bytes_per_sec"] is None:
                    continue
                sequential = name.startswith("SEQ")
                figure, used = fio(cell["fio"].split(), op, sequential)
                theirs[(name, op)].append(figure)
                cpu.setdefault(("fio", name, op), []).append(used)
                lightest = cell["fio"].split() + LIGHT
                if "--ioengine=io_uring_cmd" in lightest:
                    lightest += ["--fixedbufs=1", "--registerfiles=1"]
                light[(name, op)].append(fio(lightest, op, sequential)[0])
        if i % 2 == 0:
            ddx_side(first if i == 0 else None)
            fio_side()
        else:
            fio_side()
            ddx_side()
    kind = first["target"]["kind"]
    not_the_device = first["summary"].get("not_the_device")
    differs = None
    print(f"ddx bench {node} ({kind}) beside fio, {rounds} rounds, working set {size_mib} MiB:")
    for name, op, cell in cells:
        if cell["throughput_bytes_per_sec"] is None:
            print(f"  {name} {op:5s}: not measured by ddx ({cell['missing']})")
            continue
        key = (name, op)
        sequential = name.startswith("SEQ")
        unit, scale = ("MB/s", 1e6) if sequential else ("kIOPS", 1e3)
        bar = 0.10 if sequential else 0.15
        median = lambda xs: statistics.median(xs) / scale
        ratios = [a / b for a, b in zip(mine[key], theirs[key])]
        if cell.get("fio_way") is None:
            held, what = ratios, "ddx/fio"
            line = f"fio {median(theirs[key]):.1f} {unit}, ddx {median(mine[key]):.1f} {unit}"
        else:
            # fio's options reproduce the requests made fio's way, which
            # ddx measures beside the cell: that is what the bar holds.
            held, what = [a / b for a, b in zip(ways[key], theirs[key])], "ddx (fio's way)/fio"
            line = (f"fio {median(theirs[key]):.1f} {unit}, ddx fio's way "
                    f"{median(ways[key]):.1f} {unit}, ddx {median(mine[key]):.1f} {unit}")
        ratio = statistics.median(held)
        passed = abs(ratio - 1) <= bar
        # A cell outside its bar counts as marked only where ddx's report
        # says, beside it, why no figure there is the device's own.
        ok &= passed or not_the_device is not None
        verdict = "ok" if passed else ("outside, marked in the report (**)" if not_the_device
                                       else "MISSED")
        labels = {"fio": "fio", "way": "ddx fio's way", "ddx": "ddx"}
        used = ", ".join(f"{labels[who]} {statistics.median(cpu[(who, name, op)]):.0f}%"
                         for who in labels if (who, name, op) in cpu)
        print(f"  {name} {op:5s}: {line}; CPU (% of one) {used}")
        print(f"  {'':17s}{what} {spread(held)}: bar ±{bar:.0%} {verdict}")
        lightest = [a / b for a, b in zip(mine[key] if cell.get("fio_way") is None else ways[key],
                                          light[key])]
        print(f"  {'':17s}fio at its lightest {median(light[key]):.1f} {unit}: "
              f"{what.split('/')[0]}/that {spread(lightest)}")
        if cell.get("fio_way") is not None:
            print(f"  {'':17s}the cell: ddx/fio {spread(ratios)}, not held to the bar (*)")
            differs = cell["fio_way"]["differs"]
        print(f"  {'':17s}fio {cell['fio']}")
    if differs:
        print(f"  (*) {differs}.")
    if not_the_device:
        print(f"  (**) ddx's report: {not_the_device}.")
sys.exit(0 if ok else 1)
PY
python3 /tmp/vs-fio.py /tmp/ddx "$size_mib" "$rounds" "$time_s" || status=$?
echo $status >/tmp/out/status
exit $status
EOF

"$kit/qemu/usr/bin/qemu-system-x86_64" -L "$kit/qemu/usr/share/qemu" -L "$kit/qemu/usr/share/seabios" \
  -M q35 -nic none -display none -no-reboot -m 1024 -smp "${CPUS:-2}" \
  -serial "file:$dir/console.log" -kernel "$kit/vmlinux" -initrd "$dir/initramfs" \
  -append "console=ttyS0 quiet panic=-1" \
  -virtfs local,path=/,mount_tag=host,security_model=none,readonly=on,multidevs=remap \
  -virtfs "local,path=$dir/share,mount_tag=out,security_model=none" \
  -device virtio-scsi-pci,id=scsi -drive "if=none,id=scsidisk,file=$dir/scsi.img,format=raw" \
  -device scsi-hd,drive=scsidisk \
  -drive "if=none,id=nvmedisk,file=$dir/nvme.img,format=raw" -device nvme,serial=ddxbench,drive=nvmedisk
cat "$dir/share/report.txt" 2>/dev/null || { echo "the guest wrote no report:"; tail -20 "$dir/console.log"; exit 1; }
# Part 3's verdict (parts 1 and 2 print theirs).
exit "$(cat "$dir/share/status" 2>/dev/null || echo 1)"
