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
# Every program from the guest's tmpfs, not over 9p: a copy's time is
# the copy's, not the loading of its binary.
cp "$ddx" /tmp/ddx; cp "$(command -v sgp_dd)" /tmp/sgp_dd
median() { sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else printf "%.4f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
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

for dir in read write; do
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
  echo "sg $dir: median ddx/sgp_dd time ratio $(echo $ratios | tr ' ' '\n' | median) (bar <= 1.0)"
done

for dir in read write; do
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
  echo "ng $dir: median ddx/fio throughput ratio $(echo $ratios | tr ' ' '\n' | median) (bar >= 0.9)"
done
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
