#!/usr/bin/env python3
"""Seed the fuzz corpora (fuzz/corpus/<target>/) from what the tests use.

The parsers' targets get the literals of the unit and integration tests:
operand and option lists, numbers, URIs, bmap XML, mapfiles, AWS files,
kernel texts and tool outputs. The decoders' targets get small files made
by the real compressors (zstd, pzstd, xz, gzip, pigz, bzip2, lz4) as the
image tests make them, and bmaptool's and GNU ddrescue's own files join
the parsers' seeds. The disk targets get small disks laid out by sfdisk
and made by mkfs.ext4, mkfs.vfat, mkswap, mkfs.xfs and mkntfs, in the
sparse form they read (see `sparse`). Each seed is stored under the SHA-1 of its bytes, as
libFuzzer names its inputs, so seeding twice adds nothing.

Run from anywhere (`seed.py disks` seeds the disk targets only); then
minimise (bench/fuzz.sh --minimise) so that only
seeds that reach new code stay.
"""

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")


def store(target, data):
    if isinstance(data, str):
        data = data.encode()
    directory = os.path.join(CORPUS, target)
    os.makedirs(directory, exist_ok=True)
    name = hashlib.sha1(data).hexdigest()
    with open(os.path.join(directory, name), "wb") as f:
        f.write(data)


def rust_sources(*parts):
    base = os.path.join(ROOT, *parts)
    for directory, _, files in os.walk(base):
        for name in sorted(files):
            if name.endswith(".rs"):
                yield os.path.join(directory, name)


STRING = re.compile(r'(?<![A-Za-z0-9_#])"((?:[^"\\]|\\.)*)"', re.S)


def unescape(body):
    """A Rust string literal's value: escapes and line continuations."""
    body = re.sub(r"\\\n\s*", "", body)
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        n = body[i + 1]
        simple = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", '"': '"', "'": "'"}
        if n in simple:
            out.append(simple[n])
            i += 2
        elif n == "x":
            out.append(chr(int(body[i + 2 : i + 4], 16)))
            i += 4
        elif n == "u":
            end = body.index("}", i)
            out.append(chr(int(body[i + 3 : end], 16)))
            i = end + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def literals(paths):
    for path in paths:
        text = open(path, encoding="utf-8").read()
        for match in STRING.finditer(text):
            yield unescape(match.group(1))


def word_lists(paths):
    """Every `&["a", "b"]` / `vec!["a"]` / `["a", "b"]` list of literals."""
    pattern = re.compile(r'\[((?:\s*"(?:[^"\\]|\\.)*"\s*,?)+)\]')
    for path in paths:
        text = open(path, encoding="utf-8").read()
        for match in pattern.finditer(text):
            yield [unescape(m.group(1)) for m in STRING.finditer(match.group(1))]


KEYS = ("if", "of", "bs", "ibs", "obs", "cbs", "skip", "seek", "count", "conv",
        "iflag", "oflag", "status", "iseek", "oseek")


def is_operand(word):
    return "=" in word and word.split("=", 1)[0] in KEYS


def seed_command_lines(test_files):
    lists = [w for w in word_lists(test_files)
             if w and all(is_operand(x) or x.startswith("--") for x in w)]
    numbers = set()
    for words in lists:
        store("operands", "\0".join(words))
        for word in words:
            if is_operand(word) and word.split("=")[0] not in ("if", "of", "conv", "iflag", "oflag", "status"):
                numbers.add(word.split("=", 1)[1])
    for literal in literals(test_files):
        if is_operand(literal) or literal.startswith("--"):
            store("operands", literal)
    for literal in literals(rust_sources("src", "operands")):
        if re.fullmatch(r"[ +\-0-9A-Za-z]{1,24}", literal):
            numbers.add(literal)
    for number in numbers:
        store("number", number)
    bench = [w for w in word_lists([os.path.join(ROOT, "src", "bench", "args.rs"),
                                    os.path.join(ROOT, "tests", "all", "bench.rs")])
             if any(x.startswith("--") for x in w)]
    for words in bench:
        store("bench_args", "\0".join(words + ["target.img"]))
        store("bench_args", "\0".join(words))


def seed_texts():
    src = list(rust_sources("src"))
    tests = list(rust_sources("tests"))
    everything = list(literals(src + tests))
    for text in everything:
        if "<bmap" in text:
            store("bmap", text)
        if re.search(r"0x[0-9A-Fa-f]+\s+0x[0-9A-Fa-f]+\s+[?*/+-]", text):
            store("mapfile", text)
        if re.match(r"(?i)(nbds?(\+unix|\+vsock)?|s3|https?)://", text):
            store("uri", text)
        if " - " in text and re.search(r"\d+:\d+ /", text):
            store("kernel_texts", text)
        if re.search(r"^(Mem|some |0::|Filename)", text, re.M):
            store("kernel_texts", text)
        if re.search(r"^(TYPE|PTTYPE|LABEL|DEVNAME)=|NR=\"|Block count:", text, re.M):
            store("device_probe", text)
        if "<ListPartsResult" in text:
            store("list_parts", text)
        if "# ddx upload: " in text:
            store("upload_record", text)
    for name in ["disk.img", "-", "./-", "a\\b", "n\nl", "ab\r", "a\rb", "a) = b", "s3://b/k"]:
        for algorithm in range(3):
            store("hash_file", bytes([algorithm]) + name.encode())
    # The shared files of the profile tests, with an environment.
    profile = open(os.path.join(ROOT, "src", "ends", "object", "profile.rs")).read()
    consts = dict(re.findall(r'const (\w+): &str = "((?:[^"\\]|\\.)*)";', profile, re.S))
    credentials = unescape(consts.get("CREDENTIALS", ""))
    config = unescape(consts.get("CONFIG", ""))
    for env in ["", "AWS_PROFILE=dev", "AWS_PROFILE=sso", "AWS_ACCESS_KEY_ID=AKIA\nAWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG",
                "AWS_MAX_ATTEMPTS=0", "AWS_PROFILE=nope", "AWS_ENDPOINT_URL=http://127.0.0.1:9000\nAWS_REGION=eu-west-1"]:
        store("aws_config", "\0".join([env, credentials, config]))
    token = "FwoGZX/IvYXdz+EBo="
    store("redact", "\0".join([
        "denied: secret wJalrXUtnFEMI/K7MDENG, header " + token + ", url ?X-Amz-Security-Token=FwoGZX%2FIvYXdz%2BEBo%3D",
        "wJalrXUtnFEMI/K7MDENG", token]))
    store("redact", "\0".join(["<Error><Code>SignatureDoesNotMatch</Code><CanonicalRequest>x-amz-security-token:tok%2Ben</CanonicalRequest></Error>", "tok+en"]))
    for seed in [b"", b"\x02\x00\x10\x00\x03\x10\x00\x00\x00\x02", bytes(range(64)), b"\xff" * 32]:
        store("extents", seed)


def seed_sense():
    """SCSI sense data as devices return it: fixed format (70h, 71h) with
    and without the VALID bit, descriptor format (72h, 73h) with and
    without an information descriptor, for a medium error (what
    scsi_debug injects: 11h/00h at LBA 4660), a write error, a unit
    attention and an illegal request; each also behind three status bytes
    (SAM status, host, driver) as the target reads its second command."""
    def fixed(first, key, asc, ascq, lba=0):
        return bytes([first, 0, key]) + lba.to_bytes(4, "big") + bytes([10, 0, 0, 0, 0, asc, ascq, 0, 0, 0, 0])

    def descriptor(first, key, asc, ascq, lba=None, valid=True):
        body = b""
        if lba is not None:
            body = bytes([0x00, 0x0a, 0x80 if valid else 0, 0]) + lba.to_bytes(8, "big")
        return bytes([first, key, asc, ascq, 0, 0, 0, len(body)]) + body

    seeds = [
        fixed(0xf0, 0x03, 0x11, 0x00, 4660),
        fixed(0x70, 0x03, 0x11, 0x00, 4660),
        fixed(0xf1, 0x03, 0x0c, 0x00, 77),
        fixed(0x70, 0x06, 0x29, 0x00),
        fixed(0x70, 0x05, 0x21, 0x00),
        fixed(0xf0, 0x04, 0x44, 0x00, 1 << 31),
        descriptor(0x72, 0x03, 0x11, 0x00, 0x1_2345_6789),
        descriptor(0x72, 0x03, 0x11, 0x00, 4660, valid=False),
        descriptor(0x73, 0x03, 0x0c, 0x02, 9),
        descriptor(0x72, 0x02, 0x04, 0x01),
    ]
    for seed in seeds:
        store("scsi_sense", seed)
        store("scsi_sense", bytes([0x02, 0x00, 0x08]) + seed)
    store("scsi_sense", bytes([0x00, 0x03, 0x00]))
    store("scsi_sense", bytes([0x08, 0x00, 0x00]))


def run(*args, **kw):
    return subprocess.run(args, check=True, capture_output=True, **kw).stdout


def sample(size, kind):
    if kind == "zeros":
        return bytes(size)
    if kind == "text":
        words = b"the quick brown fox jumps over the lazy dog "
        return (words * (size // len(words) + 1))[:size]
    state, out = 12345, bytearray()
    while len(out) < size:
        state = (state * 6364136223846793005 + 1442695040888963407) % 2**64
        out += (state >> 33).to_bytes(4, "little")
    return bytes(out[:size])


def seed_images(work):
    def make(name, data):
        path = os.path.join(work, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def compress(command, data):
        return subprocess.run(command, input=data, check=True, capture_output=True).stdout

    # Small, so that each run of a decoder under the sanitizer is quick;
    # zeros and text make long matches, random bytes raw blocks.
    samples = [sample(0, "zeros"), sample(1, "text"), sample(5000, "text"),
               sample(70000, "zeros"), sample(3000, "random"), sample(20000, "text")]
    for data in samples:
        frames = [compress(["zstd", "-q", "-c", "-1"], data),
                  compress(["zstd", "-q", "-c", "-19", "--no-check"], data),
                  compress(["zstd", "-q", "-c", "--long=24"], data),
                  compress(["pzstd", "-q", "-c", "-p", "2"], data)]
        # A frame with no content size, as zstd writes from a pipe.
        frames.append(subprocess.run("cat | zstd -q -c", shell=True, input=data,
                                     check=True, capture_output=True).stdout)
        for frame in frames:
            store("zstd", frame)
            store("decompress", frame)
            store("zstd_blocks", b"\0" + frame)
            store("zstd_blocks", b"\1" + frame)
        store("zstd", frames[0] + frames[1])
        for xz in [compress(["xz", "-c", "-1"], data), compress(["xz", "-c", "-T2", "--block-size=8192"], data),
                   compress(["xz", "-c", "--check=sha256"], data)]:
            store("xz", xz)
            store("decompress", xz)
        store("xz", compress(["xz", "-c"], data) + bytes(4) + compress(["xz", "-c"], data))
        for gz in [compress(["gzip", "-c"], data), compress(["pigz", "-c", "-p", "2"], data)]:
            store("gzip", gz)
            store("decompress", gz)
        store("gzip", compress(["gzip", "-c"], data) * 2)
        for bz in [compress(["bzip2", "-c", "-1"], data)]:
            store("bzip2", bz)
            store("bzip2", bz * 2)
            store("decompress", bz)
        for lz in [compress(["lz4", "-q", "-c"], data), compress(["lz4", "-q", "-c", "-l"], data),
                   compress(["lz4", "-q", "-c", "--content-size", "-BD"], data)]:
            store("lz4", lz)
            store("decompress", lz)
        store("lz4", b"\x50\x2a\x4d\x18\x04\x00\x00\x00skip" + compress(["lz4", "-q", "-c"], data))
    store("decompress", b"plain text, not compressed\n")
    store("decompress", bytes(16))

    # bmaptool's maps of sparse images, and GNU ddrescue's mapfiles.
    for size, extents in [(40960, [(4096, 8192)]), (40960 + 100, [(0, 512), (36864, 40960 + 100)]),
                          (1 << 20, [(65536, 131072), (524288, 528384)])]:
        image = make("image.img", b"")
        with open(image, "r+b") as f:
            f.truncate(size)
            for start, end in extents:
                f.seek(start)
                f.write(sample(end - start, "random"))
        bmap = os.path.join(work, "image.bmap")
        if shutil.which("bmaptool"):
            run("bmaptool", "create", "-o", bmap, image)
            store("bmap", open(bmap, "rb").read())
        if shutil.which("ddrescue"):
            mapfile = os.path.join(work, "image.map")
            out = os.path.join(work, "out.img")
            run("ddrescue", "-q", "-s", str(size // 2), image, out, mapfile)
            store("mapfile", open(mapfile, "rb").read())
            for path in (mapfile, out):
                os.remove(path)

    # What blkid, partx and dumpe2fs say about a partitioned disk image.
    if all(shutil.which(t) for t in ("sfdisk", "blkid", "partx", "mkfs.ext4", "dumpe2fs")):
        disk = make("disk.img", b"")
        os.truncate(disk, 64 << 20)
        subprocess.run(["sfdisk", "-q", "disk.img"], input=b"label: gpt\n,16M\n,\n", cwd=work,
                       check=True, capture_output=True)
        store("device_probe", run("blkid", "-p", "-o", "export", "disk.img", cwd=work))
        store("device_probe", run("partx", "--pairs", "-o", "NR,START,SECTORS", "disk.img", cwd=work))
        fs = make("fs.img", b"")
        os.truncate(fs, 8 << 20)
        run("mkfs.ext4", "-q", "-L", "my disk", "fs.img", cwd=work)
        store("device_probe", run("blkid", "-p", "-o", "export", "fs.img", cwd=work))
        store("device_probe", run("dumpe2fs", "-h", "fs.img", cwd=work))


def sparse(path):
    """A disk image as the disk targets read one (src/fuzzing/disks.rs):
    a byte giving its size as a power of two, then each sector that is not
    all zeros as its number (4 bytes, little-endian) and its 512 bytes."""
    data = open(path, "rb").read()
    out = bytearray([(len(data) - 1).bit_length()])
    for number in range(0, len(data), 512):
        sector = data[number:number + 512]
        if sector.strip(b"\0"):
            out += (number // 512).to_bytes(4, "little") + sector
    return bytes(out)


def ntfs_sectors(path):
    """The sectors of an NTFS that ddx reads: the boot file, the backup
    boot sector, the first 16 MFT records, and the first clusters of
    $LogFile (its restart pages) and $Bitmap, found as ddx finds them (the
    runs are read from the records' first 510 bytes, before the first
    check word of their update sequence)."""
    data = open(path, "rb").read()
    u16 = lambda at: int.from_bytes(data[at:at + 2], "little")
    u64 = lambda at: int.from_bytes(data[at:at + 8], "little")
    cluster = u16(0x0B) * data[0x0D]
    per_record = int.from_bytes(data[0x40:0x41], "little", signed=True)
    record = per_record * cluster if per_record > 0 else 1 << -per_record
    mft = u64(0x30) * cluster
    keep = set(range(16)) | {len(data) // 512 - 1}
    keep |= set(range(mft // 512, (mft + 16 * record) // 512))
    for number, length in ((2, 8192), (6, 4 * cluster)):
        base = mft + number * record
        at = base + u16(base + 0x14)
        while int.from_bytes(data[at:at + 4], "little") not in (0x80, 0xFFFFFFFF):
            at += int.from_bytes(data[at + 4:at + 8], "little")
        pairs = at + u16(at + 0x20)
        header = data[pairs]
        sizes = (header & 0xF, header >> 4)
        lcn = int.from_bytes(data[pairs + 1 + sizes[0]:pairs + 1 + sizes[0] + sizes[1]], "little", signed=True)
        first = lcn * cluster // 512
        keep |= set(range(first, first + length // 512))
    return keep


def sparse_ntfs(path):
    """An NTFS as the ntfs target reads one: its sectors that ddx reads
    (see `ntfs_sectors`), zeros elsewhere."""
    data = open(path, "rb").read()
    out = bytearray([(len(data) - 1).bit_length()])
    for number in sorted(ntfs_sectors(path)):
        sector = data[number * 512:number * 512 + 512]
        if sector.strip(b"\0"):
            out += number.to_bytes(4, "little") + sector
    return bytes(out)


def seed_disks(work):
    def blank(name, size):
        path = os.path.join(work, name)
        with open(path, "wb") as f:
            f.truncate(size)
        return path

    def table(name, size, script, *args):
        path = blank(name, size)
        subprocess.run(["sfdisk", "-q", "--no-reread", "--no-tell-kernel", *args, path],
                       input=script.encode(), check=True, capture_output=True)
        return path

    def files(name, count):
        """A directory of small files of text, for mkfs.ext4 -d and mtools."""
        directory = os.path.join(work, name)
        os.makedirs(directory, exist_ok=True)
        for i in range(count):
            with open(os.path.join(directory, f"f{i}.txt"), "w") as f:
                f.write(f"file {i}\n" * (40 * (i + 1)))
        return directory

    if shutil.which("sfdisk"):
        # An MBR with an extended partition holding two logical ones, and
        # a GPT with both headers (the fuzzer tries 4096-byte sectors on
        # its own: sfdisk lays out a file in 512-byte ones).
        mbr = table("mbr.img", 1 << 16, "label: dos\nstart=8, size=24, type=83\n"
                    "start=40, size=80, type=5\nstart=48, size=16, type=83\nstart=72, size=16, type=c\n")
        gpt = table("gpt.img", 1 << 16, "label: gpt\nfirst-lba: 34\n\nstart=40, size=40\nstart=80, size=8\n")
        for disk in (mbr, gpt):
            store("partition_table", sparse(disk))
            store("used_blocks", sparse(disk))
    content = files("content", 6)
    if shutil.which("mkfs.ext4"):
        for name, size, args in [
            ("ext2.img", 1 << 20, ["-t", "ext2", "-b", "1024"]),
            ("ext4-csum.img", 1 << 21, ["-b", "1024", "-g", "1024", "-O", "^has_journal"]),
            ("ext4-crc16.img", 1 << 21,
             ["-b", "1024", "-g", "1024", "-O", "^has_journal,^metadata_csum,uninit_bg"]),
            ("ext4-metabg.img", 1 << 23,
             ["-b", "4096", "-g", "256", "-O", "^has_journal,meta_bg,^resize_inode,64bit"]),
            ("ext4-bigalloc.img", 1 << 23,
             ["-b", "1024", "-O", "^has_journal,bigalloc", "-C", "4096"]),
            ("ext4-journal.img", 1 << 22, ["-b", "1024"]),
        ]:
            path = blank(name, size)
            run("mkfs.ext4", "-q", "-F", "-E", "nodiscard", *args, "-d", content, path)
            store("ext", sparse(path))
            store("used_blocks", sparse(path))
    if shutil.which("mkfs.vfat"):
        for name, size, args in [
            ("fat12.img", 1 << 20, ["-F", "12"]),
            ("fat16.img", 1 << 24, ["-F", "16"]),
            ("fat32.img", 1 << 26, ["-F", "32", "-s", "1"]),
        ]:
            path = blank(name, size)
            run("mkfs.vfat", *args, path)
            if shutil.which("mcopy"):
                run("mcopy", "-i", path, *[os.path.join(content, f) for f in sorted(os.listdir(content))], "::")
            store("fat", sparse(path))
            store("used_blocks", sparse(path))
    if shutil.which("mkswap"):
        path = blank("swap.img", 1 << 16)
        run("mkswap", "-L", "a swap", path)
        store("swap", sparse(path))
        with open(path, "r+b") as f:
            f.seek(4096 - 10)
            f.write(b"S1SUSPEND\0")
        store("swap", sparse(path))
    if shutil.which("mkfs.xfs"):
        # Below the 300 MiB mkfs.xfs asks for, as xfstests makes them.
        small = dict(os.environ, QA_CHECK_FS="1", TEST_DIR=work, TEST_DEV="none")
        for name, size, args in [
            ("xfs.img", 1 << 24, []),
            ("xfs-4ag.img", 1 << 26, ["-d", "agcount=4"]),
            ("xfs-v4.img", 1 << 24, ["-m", "crc=0", "-b", "size=1024"]),
        ]:
            path = blank(name, size)
            subprocess.run(["mkfs.xfs", "-q", "-f", *args, path], env=small, check=True,
                           capture_output=True)
            store("xfs", sparse(path))
            store("used_blocks", sparse(path))
    if shutil.which("mkntfs"):
        for name, size, args in [
            ("ntfs.img", 1 << 22, []),
            ("ntfs-512.img", 1 << 22, ["-c", "512"]),
            ("ntfs-64k.img", 1 << 24, ["-c", "65536"]),
        ]:
            path = blank(name, size)
            run("mkntfs", "-q", "-f", "-Q", "-F", *args, path)
            store("ntfs", sparse_ntfs(path))
            store("used_blocks", sparse_ntfs(path))
        # Marked dirty, as ntfsfix leaves a volume for chkdsk.
        if shutil.which("ntfsfix"):
            run("ntfsfix", path)
            store("ntfs", sparse_ntfs(path))


def main():
    only_disks = sys.argv[1:] == ["disks"]
    if not only_disks:
        test_files = list(rust_sources("tests")) + list(rust_sources("src"))
        seed_command_lines(test_files)
        seed_texts()
        seed_sense()
    with tempfile.TemporaryDirectory() as work:
        if not only_disks:
            seed_images(work)
        seed_disks(work)
    for target in sorted(os.listdir(CORPUS)):
        print(f"{target}: {len(os.listdir(os.path.join(CORPUS, target)))} seeds")


if __name__ == "__main__":
    sys.exit(main())
