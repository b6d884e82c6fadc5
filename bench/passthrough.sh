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
#  3. ddx bench seq-read and seq-write on /dev/sg0 and /dev/ng0n1 beside
#     fio's sg and io_uring_cmd engines at the same request size and one
#     request in flight (figures printed, no bar).
# Each figure is taken ROUNDS times (default 5), ddx and its peer back to
# back in alternating order; the verdict is the median of the per-round
# ratios. The emulated machine's absolute speed means nothing: only the
# ratios do.
#
# usage (root): bench/passthrough.sh [SIZE_MiB] (default 256). KIT= the
# guest kit (default /opt/ddx-guest; bash .ci/guest-kit makes it).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "bench/passthrough.sh needs root"; exit 1; }
size_mib=${1:-256}
rounds=${ROUNDS:-5}
qd=${QD:-8}
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
EOF
cat >>"$dir/share/run.sh" <<'EOF'
exec >/tmp/out/report.txt 2>&1
now() { date +%s%N; }
# seconds taken by a command, its output dropped
took() { local t0 t1; t0=$(now); "$@" >/dev/null 2>&1 || echo "FAILED: $*" >&2; t1=$(now); echo "$(( (t1 - t0) / 1000 ))"; }
median() { sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else printf "%.4f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
blocks=$((size_mib * 2048))
# fio's bandwidth in bytes per second (its JSON), over the whole namespace
fio_bw() { fio --name=x --ioengine=io_uring_cmd --cmd_type=nvme --filename=/dev/ng0n1 \
  --rw="$1" --bs=64k --iodepth="$qd" --size=100% --output-format=json 2>/dev/null |
  tr -d ' \n' | sed 's/.*"'"$2"'":{"io_bytes":[0-9]*,"io_kbytes":[0-9]*,"bw_bytes":\([0-9]*\).*/\1/'; }
echo "guest: $(nproc) CPU, $size_mib MiB disks, $rounds rounds, queue depth $qd for NVMe"

for dir in read write; do
  ratios=
  for round in $(seq "$rounds"); do
    if [ "$dir" = read ]; then
      a="$ddx if=/dev/sg0 of=/dev/null bs=64k"
      b="sgp_dd if=/dev/sg0 of=/dev/null bs=512 bpt=128 thr=4"
    else
      a="$ddx if=/dev/zero of=/dev/sg0 bs=64k count=$((size_mib * 16))"
      b="sgp_dd if=/dev/zero of=/dev/sg0 bs=512 bpt=128 thr=4 count=$blocks"
    fi
    if [ $((round % 2)) -eq 1 ]; then ta=$(took $a); tb=$(took $b); else tb=$(took $b); ta=$(took $a); fi
    ratios="$ratios $(awk -v a="$ta" -v b="$tb" 'BEGIN { printf "%.4f", a / b }')"
    echo "sg $dir round $round: ddx $ta us, sgp_dd thr=4 $tb us"
  done
  echo "sg $dir: median ddx/sgp_dd time ratio $(echo $ratios | tr ' ' '\n' | median) (bar <= 1.0)"
done

for dir in read write; do
  ratios=
  for round in $(seq "$rounds"); do
    if [ "$dir" = read ]; then
      a="$ddx if=/dev/ng0n1 of=/dev/null bs=64k --queue-depth=$qd"
    else
      a="$ddx if=/dev/zero of=/dev/ng0n1 bs=64k count=$((size_mib * 16)) --queue-depth=$qd"
    fi
    if [ $((round % 2)) -eq 1 ]; then
      ta=$(took $a); fb=$(fio_bw "$dir" "$dir")
    else
      fb=$(fio_bw "$dir" "$dir"); ta=$(took $a)
    fi
    db=$(awk -v us="$ta" -v m="$size_mib" 'BEGIN { printf "%.0f", m * 1048576 / (us / 1e6) }')
    ratios="$ratios $(awk -v a="$db" -v b="$fb" 'BEGIN { printf "%.4f", a / b }')"
    echo "ng $dir round $round: ddx $db B/s, fio io_uring_cmd $fb B/s"
  done
  echo "ng $dir: median ddx/fio throughput ratio $(echo $ratios | tr ' ' '\n' | median) (bar >= 0.9)"
done

# ddx bench beside fio's own passthrough engines (figures only).
$ddx bench /dev/sg0 --tests=seq-read,seq-write --destructive --force --size=$((size_mib / 2))M --runs=1 2>&1 | sed 's/^/ddx bench sg: /'
fio --name=x --ioengine=sg --filename=/dev/sg0 --rw=read --bs=1M --size=$((size_mib / 2))M --output-format=terse 2>&1 | cut -d';' -f7 | sed 's/^/fio sg read KiB\/s: /'
$ddx bench /dev/ng0n1 --tests=seq-read,seq-write --destructive --force --size=$((size_mib / 2))M --runs=1 2>&1 | sed 's/^/ddx bench ng: /'
fio --name=x --ioengine=io_uring_cmd --cmd_type=nvme --filename=/dev/ng0n1 --rw=read --bs=1M --size=$((size_mib / 2))M --output-format=terse 2>&1 | cut -d';' -f7 | sed 's/^/fio io_uring_cmd read KiB\/s: /'
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
