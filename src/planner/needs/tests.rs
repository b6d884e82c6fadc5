//! The needs table, cell by cell: every option against every kind of end,
//! with made-up facts (no root, no devices).

use super::*;
use crate::planner::facts::{Beside as Places, EndFacts};
use crate::request::{BackendChoice, Settings};
use crate::sys::Errno;

fn request(words: &[&str], settings: Settings) -> Request {
    let words: Vec<std::ffi::OsString> = words.iter().map(Into::into).collect();
    Request {
        plan: crate::operands::parse(&words).plan.expect("valid operands"),
        settings,
    }
}

/// The ends a copy can have, as facts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum E {
    File,
    Block,
    Zero,
    Null,
    Pipe,
    Socket,
    Export,
    Stream,
    /// A SCSI or NVMe generic node (/dev/sg0, /dev/ng0n1).
    Generic,
}

const ALL: [E; 9] = [
    E::File,
    E::Block,
    E::Zero,
    E::Null,
    E::Pipe,
    E::Socket,
    E::Export,
    E::Stream,
    E::Generic,
];

fn end(e: E) -> EndFacts {
    let with_fd = |kind| EndFacts {
        descriptor: true,
        ..EndFacts::of_kind(kind)
    };
    match e {
        E::File => with_fd(Kind::RegularFile),
        E::Block => with_fd(Kind::BlockDevice),
        E::Zero => with_fd(Kind::CharDevice),
        E::Null => EndFacts {
            null_device: true,
            ..with_fd(Kind::CharDevice)
        },
        E::Pipe => with_fd(Kind::Pipe),
        E::Socket => with_fd(Kind::Socket),
        E::Export => EndFacts::of_kind(Kind::NbdExport),
        E::Stream => EndFacts::of_kind(Kind::Stream),
        E::Generic => EndFacts::of_kind(Kind::Passthrough),
    }
}

fn writable() -> Place {
    Place {
        kind: None,
        identity: None,
        unwritable: None,
    }
}

fn facts(input: E, output: E) -> Facts {
    Facts {
        input: end(input),
        output: end(output),
        cpus: 2,
        cpu_pressure: Some(0),
        memory: Default::default(),
        beside: Places {
            map: Some(writable()),
            hash_file: Some(writable()),
            bmap_create: Some(writable()),
        },
    }
}

/// The default settings with `set` applied.
fn asked(set: impl FnOnce(&mut Settings)) -> Settings {
    let mut settings = Settings::default();
    set(&mut settings);
    settings
}

/// Why a copy from `input` to `output` is refused.
fn why(settings: Settings, words: &[&str], input: E, output: E) -> String {
    admit(&request(words, settings), &facts(input, output))
        .expect_err("refused")
        .to_string()
}

/// Which (input, output) pairs an option accepts.
fn accepted(settings: &Settings, words: &[&str]) -> Vec<(E, E)> {
    let request = request(words, settings.clone());
    let mut pairs = Vec::new();
    for input in ALL {
        for output in ALL {
            if admit(&request, &facts(input, output)).is_ok() {
                pairs.push((input, output));
            }
        }
    }
    pairs
}

fn every_pair_where(input: &[E], output: &[E]) -> Vec<(E, E)> {
    let mut pairs = Vec::new();
    for i in ALL.into_iter().filter(|e| input.contains(e)) {
        for o in ALL.into_iter().filter(|e| output.contains(e)) {
            pairs.push((i, o));
        }
    }
    pairs
}

const POSITIONAL_IN: &[E] = &[E::File, E::Block, E::Export, E::Generic];
const POSITIONAL_OUT: &[E] = &[E::File, E::Block, E::Null, E::Export, E::Generic];

#[test]
fn a_copy_by_position_needs_positions_at_both_ends() {
    let map = Some("m".into());
    for settings in [
        asked(|s| s.rescue = true),
        asked(|s| s.map = map.clone()),
        asked(|s| {
            s.resume = true;
            s.map = map;
        }),
    ] {
        assert_eq!(
            accepted(&settings, &["if=a", "of=b"]),
            every_pair_where(POSITIONAL_IN, POSITIONAL_OUT),
            "{settings:?}"
        );
    }
}

#[test]
fn resume_without_a_map_needs_an_output_file_to_keep_it_beside() {
    let settings = asked(|s| s.resume = true);
    assert_eq!(
        accepted(&settings, &["if=a", "of=b"]),
        every_pair_where(POSITIONAL_IN, &[E::File])
    );
    assert_eq!(
        why(settings, &["if=a", "of=/dev/loop0"], E::File, E::Block),
        "--resume keeps its map beside the output, and of='/dev/loop0' is a block device: \
         name the map with --map=FILE"
    );
}

#[test]
fn verify_needs_an_output_it_can_read_back() {
    let settings = asked(|s| s.verify = true);
    assert_eq!(
        accepted(&settings, &["of=b"]),
        every_pair_where(&ALL, &[E::File, E::Block, E::Export, E::Generic])
    );
    assert_eq!(
        why(settings.clone(), &["of=/dev/null"], E::Zero, E::Null),
        "--verify reads the output back: of='/dev/null' is the null device, which keeps nothing"
    );
    assert_eq!(
        why(settings, &["of=p"], E::File, E::Pipe),
        "--verify reads the output back: of='p' is a pipe, which it cannot read back"
    );
}

#[test]
fn fua_needs_a_generic_node_as_output() {
    let settings = asked(|s| s.fua = true);
    assert_eq!(
        accepted(&settings, &["of=b"]),
        every_pair_where(&ALL, &[E::Generic])
    );
    assert_eq!(
        why(settings, &["of=/dev/sda"], E::File, E::Block),
        "--fua sends each write with force unit access: of='/dev/sda' is a block device, \
         not a SCSI or NVMe generic node (/dev/sg*, /dev/bsg/*, /dev/ng*); oflag=dsync \
         makes each write durable there"
    );
}

#[test]
fn hash_file_needs_an_input_that_reads_the_same_twice() {
    let settings = asked(|s| {
        s.hash = vec![crate::integrity::Algorithm::Sha256];
        s.hash_file = Some("sums".into());
    });
    assert_eq!(
        accepted(&settings, &["if=a"]),
        every_pair_where(&[E::File, E::Block, E::Export, E::Stream, E::Generic], &ALL)
    );
}

#[test]
fn rescue_from_a_character_device_says_why_in_one_line() {
    let settings = asked(|s| s.rescue = true);
    let why = why(
        settings,
        &["if=/dev/zero", "of=r.img", "bs=1M", "count=4"],
        E::Zero,
        E::File,
    );
    assert_eq!(
        why,
        "--rescue reads the input by position: if='/dev/zero' is a character device, which \
         has no positions"
    );
    assert!(!why.contains('\n'));
}

#[test]
fn options_that_tune_or_report_take_every_end() {
    let tuning = [
        asked(|s| s.backend = Some(BackendChoice::Threads)),
        asked(|s| s.queue_depth = Some(4)),
        asked(|s| s.request_size = Some(1 << 20)),
        asked(|s| s.offload = Offload::Always),
        asked(|s| s.offload = Offload::Never),
        asked(|s| s.cache = crate::request::CacheChoice::Drop),
        asked(|s| {
            s.cache = crate::request::CacheChoice::Keep;
            s.verbose = true;
            s.force = true;
            s.progress_fd = Some(2);
            s.hash = vec![crate::integrity::Algorithm::Blake3];
        }),
    ];
    let everything = every_pair_where(&ALL, &ALL);
    for settings in tuning {
        assert_eq!(accepted(&settings, &[]), everything, "{settings:?}");
    }
    assert_eq!(
        accepted(
            &Settings::default(),
            &["bs=auto", "count=4M", "iflag=count_bytes"]
        ),
        everything
    );
}

#[test]
fn tuning_the_overlap_contradicts_gnus_loop() {
    for settings in [
        asked(|s| {
            s.backend = Some(BackendChoice::Sync);
            s.queue_depth = Some(4);
        }),
        asked(|s| {
            s.backend = Some(BackendChoice::Sync);
            s.request_size = Some(4096);
        }),
    ] {
        assert_eq!(accepted(&settings, &[]), Vec::new(), "{settings:?}");
    }
}

/// The refusal of a copy from one file to another, with `place` standing
/// where the map (or, with `hash_file`, the digest file) will be.
/// The input is file 7 of file system 1.
fn refused_beside(settings: Settings, words: &[&str], place: Place, hash_file: bool) -> String {
    let mut facts = facts(E::File, E::File);
    facts.input.identity = Some(crate::planner::Identity::File {
        device: 1,
        inode: 7,
    });
    let slot = if hash_file {
        &mut facts.beside.hash_file
    } else {
        &mut facts.beside.map
    };
    *slot = Some(place);
    admit(&request(words, settings), &facts)
        .expect_err("refused")
        .to_string()
}

#[test]
fn files_beside_the_copy_must_be_writable_files() {
    let read_only = || Place {
        unwritable: Some(Errno::ROFS),
        ..writable()
    };
    let map = asked(|s| s.map = Some("/ro/m".into()));
    let hash_file = asked(|s| {
        s.hash = vec![crate::integrity::Algorithm::Sha256];
        s.hash_file = Some("/ro/sums".into());
    });
    let resume = asked(|s| s.resume = true);
    let device = Place {
        kind: Some(Kind::BlockDevice),
        ..writable()
    };
    let cases = [
        (
            refused_beside(map.clone(), &["if=a", "of=b"], read_only(), false),
            "--map='/ro/m' cannot be written: Read-only file system",
        ),
        (
            refused_beside(map, &["if=a", "of=b"], device, false),
            "--map='/ro/m' is a block device, not a file ddx may write",
        ),
        (
            refused_beside(hash_file, &["if=a", "of=b"], read_only(), true),
            "--hash-file='/ro/sums' cannot be written: Read-only file system",
        ),
        // The map named as the input itself.
        (
            refused_beside(
                asked(|s| s.map = Some("a".into())),
                &["if=a", "of=b"],
                Place {
                    kind: Some(Kind::RegularFile),
                    identity: Some(crate::planner::Identity::File {
                        device: 1,
                        inode: 7,
                    }),
                    unwritable: None,
                },
                false,
            ),
            "--map='a' is an end of the copy, which writing it would overwrite",
        ),
        // The checkpoint beside an output on a read-only file system.
        (
            refused_beside(resume, &["if=a", "of=/ro/b"], read_only(), false),
            "--resume: its map '/ro/b.ddx-map' cannot be written: Read-only file system",
        ),
    ];
    for (got, wanted) in cases {
        assert_eq!(got, wanted);
    }
}

/// Standard input is named '-' in the digest file, and its checker reads
/// it as such: a pipe or socket on standard input is accepted.
#[test]
fn hash_file_takes_standard_input_whatever_it_is() {
    let settings = asked(|s| {
        s.hash = vec![crate::integrity::Algorithm::Sha256];
        s.hash_file = Some("sums".into());
    });
    for input in [E::Pipe, E::Socket, E::Zero] {
        assert_eq!(
            admit(
                &request(&["of=b"], settings.clone()),
                &facts(input, E::File)
            ),
            Ok(())
        );
    }
}

#[test]
fn trim_needs_an_output_that_can_discard() {
    let settings = asked(|s| s.trim = true);
    assert_eq!(
        accepted(&settings, &["of=b"]),
        every_pair_where(&ALL, &[E::File, E::Block, E::Export])
    );
    assert_eq!(
        why(settings.clone(), &["of=/dev/null"], E::File, E::Null),
        "--trim discards zeros on the output: of='/dev/null' is a character device, where \
         nothing can be discarded"
    );
    assert_eq!(
        why(settings.clone(), &[], E::File, E::Pipe),
        "--trim discards zeros on the output: standard output is a pipe, where nothing can \
         be discarded"
    );
    let mut object = facts(E::File, E::File);
    object.output = EndFacts::of_kind(Kind::Object);
    assert_eq!(
        admit(&request(&["of=s3://b/k"], settings), &object)
            .expect_err("refused")
            .to_string(),
        "--trim discards zeros on the output: of='s3://b/k' is an object, where nothing can be \
         discarded"
    );
}

#[test]
fn trim_onto_a_compressed_output_is_refused_whatever_holds_it() {
    let settings = asked(|s| {
        s.trim = true;
        s.compress = Some(crate::image::Compression::parse("zstd").unwrap());
    });
    assert_eq!(accepted(&settings, &["of=b.zst"]), vec![]);
    assert_eq!(
        why(settings, &["of=b.zst"], E::File, E::File),
        "--trim discards zeros on the output: of='b.zst' is a stream, where nothing can be \
         discarded"
    );
}

#[test]
fn trim_is_refused_where_the_bytes_do_not_go_where_it_discards() {
    let trim = asked(|s| s.trim = true);
    assert_eq!(
        why(trim.clone(), &["of=b", "oflag=append"], E::File, E::File),
        "--trim cannot be combined with oflag=append: an appended output is written at its \
         end, not where its zeros would be discarded"
    );
    let rescue = asked(|s| {
        s.trim = true;
        s.rescue = true;
    });
    assert!(why(rescue, &["if=a", "of=b"], E::File, E::File)
        .starts_with("--trim cannot be combined with --rescue"));
    assert!(admit(
        &request(&["of=b", "conv=sparse"], trim),
        &facts(E::File, E::File)
    )
    .is_ok());
}

#[test]
fn a_directory_input_is_refused_in_gnus_words_unless_nothing_is_read() {
    let mut facts = facts(E::File, E::File);
    facts.input = EndFacts::of_kind(Kind::Directory);
    let refused = |words: &[&str]| admit(&request(words, Settings::default()), &facts);
    assert_eq!(
        refused(&["if=/tmp", "of=out"]),
        Err(Refusal("error reading '/tmp': Is a directory".into()))
    );
    assert_eq!(
        refused(&["of=out"]),
        Err(Refusal(
            "error reading 'standard input': Is a directory".into()
        ))
    );
    // count=0 reads nothing, and GNU succeeds.
    assert_eq!(refused(&["if=/tmp", "of=out", "count=0"]), Ok(()));
}

/// The facts of a copy of a compressed input (`format`, or plain) onto
/// `output`.
fn compressed(format: Option<crate::image::Format>, output: E) -> Facts {
    let mut facts = facts(E::File, output);
    facts.input.compressed = format;
    facts
}

#[test]
fn a_compressed_input_onto_what_takes_it_as_an_image_needs_a_word() {
    use crate::image::Format;
    let copy = |words: &[&str], settings: Settings, facts: &Facts| {
        compressed_onto(&request(words, settings), facts, &[])
    };
    let xz = compressed(Some(Format::Xz), E::Block);
    let onto = copy(&["if=img.raw.xz", "of=/dev/sdb"], Settings::default(), &xz)
        .expect("a block device takes it as an image");
    assert_eq!(
        onto.refusal(),
        "if='img.raw.xz' is xz-compressed and of='/dev/sdb' is a block device: \
         --decompress writes the image it holds, --no-decompress its compressed bytes as \
         they are"
    );
    assert_eq!(
        copy(
            &["of=nbd://h/e"],
            Settings::default(),
            &compressed(Some(Format::Zstd), E::Export)
        )
        .map(|o| (o.input, o.onto)),
        Some(("standard input".into(), Onto::Export))
    );
    // Saying what is meant, or compressing the output, settles it.
    for settings in [
        asked(|s| s.no_decompress = true),
        asked(|s| s.decompress = Some(crate::image::Mode::Required)),
        asked(|s| s.compress = Some(crate::image::Compression::parse("zstd").unwrap())),
    ] {
        assert_eq!(copy(&["if=a.xz", "of=/dev/sdb"], settings, &xz), None);
    }
    // Not compressed, or onto what is no image of it.
    assert_eq!(
        copy(
            &["if=a", "of=/dev/sdb"],
            Settings::default(),
            &compressed(None, E::Block)
        ),
        None
    );
    for output in [E::Pipe, E::Zero, E::Null, E::Socket, E::Stream] {
        let facts = compressed(Some(Format::Gzip), output);
        assert_eq!(
            copy(&["if=a.gz", "of=b"], Settings::default(), &facts),
            None
        );
    }
}

#[test]
fn a_file_is_the_image_when_its_name_drops_the_compression_suffix() {
    use crate::image::Format;
    let facts = compressed(Some(Format::Gzip), E::File);
    let onto = |input: &str, output: &str| {
        let words = [format!("if={input}"), format!("of={output}")];
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        compressed_onto(&request(&words, Settings::default()), &facts, &[]).map(|o| o.onto)
    };
    let without = |suffix: &str| Some(Onto::NameWithoutSuffix(suffix.into()));
    assert_eq!(onto("img.raw.xz", "img.raw"), without(".xz"));
    assert_eq!(onto("/dl/img.raw.XZ", "/mnt/img.raw"), without(".XZ"));
    assert_eq!(onto("a.zst", "a"), without(".zst"));
    assert_eq!(onto("a.img.gz", "sub/a.img"), without(".gz"));
    assert_eq!(onto("a.tgz", "a.tar"), without(".tgz"));
    assert_eq!(onto("a.img.lz4", "a.img"), without(".lz4"));
    assert_eq!(onto("a.img.bz2", "a.img"), without(".bz2"));
    for (input, output) in [
        ("img.raw.xz", "img.raw.xz.copy"),
        ("img.raw.xz", "copy.xz"),
        ("img.raw.xz", "other.raw"),
        ("img.raw", "img"),
        (".xz", "x"),
    ] {
        assert_eq!(onto(input, output), None, "{input} onto {output}");
    }
    // A --tee output counts as of= does.
    let request = request(&["if=img.xz", "of=/dev/null"], Settings::default());
    let mut facts = compressed(Some(Format::Xz), E::Null);
    facts.output.null_device = true;
    let tee = (Path::new("img"), end(E::File));
    let found = compressed_onto(&request, &facts, &[tee]).expect("the tee takes it");
    assert_eq!(found.output, "--tee='img'");
}

#[test]
fn a_mapped_image_must_fit_the_device_it_is_written_onto() {
    let settings = asked(|s| s.bmap = Some("img.bmap".into()));
    let mut facts = facts(E::Stream, E::Block);
    facts.input.size = Some(8 << 20);
    facts.output.size = Some(4 << 20);
    assert_eq!(
        admit(
            &request(&["if=img", "of=/dev/sdz"], settings.clone()),
            &facts
        )
        .expect_err("refused")
        .to_string(),
        "--bmap writes the whole image: of='/dev/sdz' is a block device of 4194304 bytes, \
         and the image is 8388608 bytes"
    );
    facts.output.size = Some(8 << 20);
    assert_eq!(
        admit(
            &request(&["if=img", "of=/dev/sdz"], settings.clone()),
            &facts
        ),
        Ok(())
    );
    // A file grows to hold it.
    let mut facts = facts.clone();
    facts.output = end(E::File);
    facts.output.size = Some(0);
    assert_eq!(
        admit(&request(&["if=img", "of=f"], settings), &facts),
        Ok(())
    );
}

/// Whether the conflicts of `--rescue` (`rescue`) or `--resume` (not)
/// accept `words`, with both ends named.
fn positional_accepts(words: &[&str], rescue: bool) -> bool {
    let mut all = vec!["if=a", "of=b"];
    all.extend_from_slice(words);
    let settings = asked(|s| {
        s.rescue = rescue;
        s.resume = !rescue;
    });
    check(&request(&all, settings)).is_ok()
}

#[test]
fn positional_copies_need_two_named_ends() {
    assert!(check(&request(&["of=b"], asked(|s| s.rescue = true)))
        .unwrap_err()
        .to_string()
        .contains("needs if=FILE"));
    assert!(check(&request(&["if=a"], asked(|s| s.resume = true)))
        .unwrap_err()
        .to_string()
        .contains("--resume needs of=FILE"));
}

#[test]
fn what_moves_bytes_is_refused() {
    for conv in ["conv=swab", "conv=ucase", "conv=sparse", "conv=sync"] {
        assert!(!positional_accepts(&[conv], true), "{conv}");
    }
    // noerror needs sync to keep positions, unless --rescue retries.
    assert!(!positional_accepts(&["conv=noerror"], false));
    assert!(positional_accepts(&["conv=noerror"], true));
    assert!(positional_accepts(&["conv=noerror,sync"], false));
    assert!(!positional_accepts(&["oflag=append"], true));
}

/// An object is written whole: GNU's operands that need it written in
/// pieces are refused on it, naming the object, and only on it.
#[test]
fn an_object_written_whole_refuses_what_needs_pieces() {
    let mut object = facts(E::File, E::File);
    object.output = EndFacts::of_kind(Kind::Object);
    for (words, line) in [
        (
            &["of=s3://b/k", "seek=1"][..],
            "of=s3://b/k: seek= cannot be used: an object is written whole, from its first byte",
        ),
        (
            &["of=s3://b/k", "conv=notrunc"],
            "of=s3://b/k: conv=notrunc cannot be used: an object is replaced whole, never \
             written in place",
        ),
        (
            &["of=s3://b/k", "oflag=append"],
            "of=s3://b/k: oflag=append cannot be used: an object is replaced whole",
        ),
    ] {
        let request = request(words, Settings::default());
        assert_eq!(admit(&request, &object).unwrap_err().to_string(), line);
        assert!(
            admit(&request, &facts(E::File, E::File)).is_ok(),
            "{words:?}"
        );
        assert!(
            admit(&request, &facts(E::File, E::Export)).is_ok(),
            "{words:?}"
        );
    }
    let rescue = request(&["if=a", "of=s3://b/k"], asked(|s| s.rescue = true));
    assert!(admit(&rescue, &object)
        .unwrap_err()
        .to_string()
        .starts_with("of=s3://b/k: --rescue cannot be used: an object is uploaded whole"));
    let mut http = facts(E::File, E::File);
    http.output = EndFacts {
        can: crate::ends::Capabilities {
            read_only: Some("read only here"),
            ..Kind::Object.capabilities()
        },
        ..EndFacts::of_kind(Kind::Object)
    };
    assert_eq!(
        admit(&request(&["of=https://h/x"], Settings::default()), &http)
            .unwrap_err()
            .to_string(),
        "of=https://h/x: read only here"
    );
}

/// An upload (an `s3://` object) kept resumable by `--map`: a stream
/// copy whose map keeps its parts, held to the upload's own rules rather
/// than a copy by position's.
#[test]
fn an_upload_kept_by_its_map_is_held_to_the_uploads_rules() {
    use crate::image::compress::{Algorithm, Compression};
    let mut object = facts(E::File, E::File);
    object.output = EndFacts::of_kind(Kind::Object);
    let words = ["if=a", "of=s3://b/k"];
    let map = |set: fn(&mut Settings)| {
        asked(|s| {
            s.map = Some("m".into());
            set(s);
        })
    };
    fn compress(algorithm: Algorithm) -> Compression {
        Compression {
            algorithm,
            level: 3,
        }
    }
    for settings in [
        map(|_| {}),
        map(|s| s.resume = true),
        map(|s| s.compress = Some(compress(Algorithm::Zstd))),
    ] {
        let request = request(&words, settings);
        assert_eq!(admit(&request, &object), Ok(()), "{:?}", request.settings);
    }
    for (settings, words, line) in [
        (
            asked(|s| s.resume = true),
            &words[..],
            "of=s3://b/k: --resume needs --map=FILE",
        ),
        (
            map(|_| {}),
            &["if=a", "of=s3://b/k", "conv=swab"],
            "of=s3://b/k: --map cannot be combined with conv=swab",
        ),
        (
            map(|s| s.compress = Some(compress(Algorithm::Xz))),
            &words,
            "of=s3://b/k: --map cannot be combined with --compress=xz",
        ),
        (
            map(|s| s.tee = vec!["t".into()]),
            &words,
            "of=s3://b/k: --map cannot be combined with --tee",
        ),
        (
            map(|_| {}),
            &["of=s3://b/k"],
            "of=s3://b/k: --map needs if=FILE",
        ),
    ] {
        let refused = admit(&request(words, settings), &object).unwrap_err();
        assert!(refused.to_string().starts_with(line), "{refused}");
    }
    // Onto a file, --map is a copy by position, which --compress is not.
    let file = request(
        &["if=a", "of=b"],
        map(|s| s.compress = Some(compress(Algorithm::Zstd))),
    );
    assert!(admit(&file, &facts(E::File, E::File)).is_err());
}

/// Every `--tee` output is a file or device of its own, held to what
/// of= is held to.
#[test]
fn tee_outputs_are_local_ends_of_their_own() {
    let settings = asked(|s| s.tee = vec!["t".into(), "u".into()]);
    let words = ["if=a", "of=b"];
    let request = request(&words, settings);
    let both = facts(E::File, E::File);
    let file = end(E::File);
    let tees = |list: &[(&'static str, EndFacts)]| -> Result<(), Refusal> {
        let list: Vec<(&Path, EndFacts)> = list
            .iter()
            .map(|(path, facts)| (Path::new(*path), facts.clone()))
            .collect();
        admit_tees(&request, [both.input.identity, both.output.identity], &list)
    };
    assert_eq!(tees(&[("t", file.clone()), ("u", file.clone())]), Ok(()));
    assert_eq!(
        tees(&[("t", end(E::Export))]).unwrap_err().to_string(),
        "--tee='t': a further output is a file or a device, not a remote end"
    );
    assert_eq!(
        tees(&[("b", file.clone())]).unwrap_err().to_string(),
        "--tee='b' is already an end of the copy: it would be written twice"
    );
    assert_eq!(
        tees(&[("t", file.clone()), ("t", file.clone())])
            .unwrap_err()
            .to_string(),
        "--tee='t' is given twice"
    );
    let verify = request_with_tee_and(|s| s.verify = true);
    assert_eq!(
        admit_tees(&verify, [None, None], &[(Path::new("t"), end(E::Pipe))])
            .unwrap_err()
            .to_string(),
        "--verify reads the output back: --tee='t' is a pipe, which it cannot read back"
    );
}

fn request_with_tee_and(set: impl FnOnce(&mut Settings)) -> Request {
    let mut settings = asked(|s| s.tee = vec!["t".into()]);
    set(&mut settings);
    request(&["if=a", "of=b"], settings)
}

/// `--retry-passes` is a rescue: refused where one is, in its own name.
#[test]
fn retry_passes_are_held_to_a_rescue() {
    let settings = asked(|s| s.retry_passes = Some(3));
    assert!(check(&request(
        &["if=a", "of=b", "conv=noerror"],
        settings.clone()
    ))
    .is_ok());
    assert!(
        check(&request(&["if=a", "of=b", "conv=swab"], settings.clone()))
            .unwrap_err()
            .to_string()
            .starts_with("--retry-passes cannot be combined with conv=swab")
    );
    assert_eq!(
        accepted(&settings, &["if=a", "of=b"]),
        every_pair_where(POSITIONAL_IN, POSITIONAL_OUT)
    );
}

#[test]
fn used_only_reads_the_disk_as_opened_by_position_whatever_it_writes_to() {
    let used_only = asked(|s| s.used_only = true);
    assert_eq!(
        accepted(&used_only, &["if=a", "of=b"]),
        every_pair_where(POSITIONAL_IN, &ALL)
    );
    // The map it records wraps the input into a stream later: the table
    // holds --used-only to the input as opened.
    let recorded = asked(|s| {
        s.used_only = true;
        s.bmap_create = Some("m.bmap".into());
        s.compress = Some(crate::image::Compression::parse("zstd").unwrap());
    });
    assert!(accepted(&recorded, &["if=a", "of=b"]).contains(&(E::Block, E::File)));
    assert_eq!(
        why(used_only.clone(), &["of=b"], E::Pipe, E::File),
        "--used-only reads the input by position: standard input is a pipe, which has no \
         positions"
    );
    for (other, set) in [
        (
            "--decompress",
            asked(|s| {
                s.used_only = true;
                s.decompress = Some(crate::image::Mode::Required);
            }),
        ),
        (
            "--bmap",
            asked(|s| {
                s.used_only = true;
                s.bmap = Some("m.bmap".into());
            }),
        ),
        ("--used-only", {
            let mut s = used_only.clone();
            s.rescue = true;
            s
        }),
    ] {
        let refused = check(&request(&["if=a", "of=b"], set))
            .expect_err("refused")
            .to_string();
        assert!(
            refused.contains(&format!("cannot be combined with {other}")),
            "{refused}"
        );
    }
}
