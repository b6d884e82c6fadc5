//! The needs table, cell by cell: every option against every kind of end,
//! with made-up facts (no root, no devices).

use super::*;
use crate::planner::facts::{Beside as Places, EndFacts};
use crate::request::Settings;
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
}

const ALL: [E; 8] = [
    E::File,
    E::Block,
    E::Zero,
    E::Null,
    E::Pipe,
    E::Socket,
    E::Export,
    E::Stream,
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
        E::Export => EndFacts::of_kind(Kind::Remote),
        E::Stream => EndFacts::of_kind(Kind::Stream),
    }
}

fn writable() -> Place {
    Place {
        kind: None,
        unwritable: None,
    }
}

fn facts(input: E, output: E) -> Facts {
    Facts {
        input: end(input),
        output: end(output),
        cpus: 2,
        beside: Places {
            map: Some(writable()),
            hash_file: Some(writable()),
        },
    }
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

const POSITIONAL_IN: &[E] = &[E::File, E::Block, E::Export];
const POSITIONAL_OUT: &[E] = &[E::File, E::Block, E::Null, E::Export];

#[test]
fn a_copy_by_position_needs_positions_at_both_ends() {
    let map = Some("m".into());
    for settings in [
        Settings {
            rescue: true,
            ..Settings::default()
        },
        Settings {
            map: map.clone(),
            ..Settings::default()
        },
        Settings {
            resume: true,
            map,
            ..Settings::default()
        },
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
    let settings = Settings {
        resume: true,
        ..Settings::default()
    };
    assert_eq!(
        accepted(&settings, &["if=a", "of=b"]),
        every_pair_where(POSITIONAL_IN, &[E::File])
    );
    let why = admit(
        &request(&["if=a", "of=/dev/loop0"], settings),
        &facts(E::File, E::Block),
    )
    .unwrap_err();
    assert_eq!(
        why.to_string(),
        "--resume keeps its map beside the output, and of='/dev/loop0' is a block device: \
         name the map with --map=FILE"
    );
}

#[test]
fn verify_needs_an_output_it_can_read_back() {
    let settings = Settings {
        verify: true,
        ..Settings::default()
    };
    assert_eq!(
        accepted(&settings, &["of=b"]),
        every_pair_where(&ALL, &[E::File, E::Block])
    );
    let why = admit(
        &request(&["of=/dev/null"], settings.clone()),
        &facts(E::Zero, E::Null),
    )
    .unwrap_err();
    assert_eq!(
        why.to_string(),
        "--verify reads the output back: of='/dev/null' is the null device, which keeps nothing"
    );
    let why = admit(&request(&["of=p"], settings), &facts(E::File, E::Pipe)).unwrap_err();
    assert_eq!(
        why.to_string(),
        "--verify reads the output back: of='p' is a pipe, which it cannot read back"
    );
}

#[test]
fn hash_file_needs_an_input_that_reads_the_same_twice() {
    let settings = Settings {
        hash: vec![crate::integrity::Algorithm::Sha256],
        hash_file: Some("sums".into()),
        ..Settings::default()
    };
    assert_eq!(
        accepted(&settings, &["if=a"]),
        every_pair_where(&[E::File, E::Block, E::Export, E::Stream], &ALL)
    );
}

#[test]
fn rescue_from_a_character_device_says_why_in_one_line() {
    let settings = Settings {
        rescue: true,
        ..Settings::default()
    };
    let why = admit(
        &request(&["if=/dev/zero", "of=r.img", "bs=1M", "count=4"], settings),
        &facts(E::Zero, E::File),
    )
    .unwrap_err()
    .to_string();
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
        Settings {
            backend: Some(BackendChoice::Threads),
            ..Settings::default()
        },
        Settings {
            queue_depth: Some(4),
            ..Settings::default()
        },
        Settings {
            request_size: Some(1 << 20),
            ..Settings::default()
        },
        Settings {
            offload: Offload::Always,
            ..Settings::default()
        },
        Settings {
            offload: Offload::Never,
            ..Settings::default()
        },
        Settings {
            keep_cache: true,
            verbose: true,
            force: true,
            progress_fd: Some(2),
            hash: vec![crate::integrity::Algorithm::Blake3],
            ..Settings::default()
        },
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
        Settings {
            backend: Some(BackendChoice::Sync),
            queue_depth: Some(4),
            ..Settings::default()
        },
        Settings {
            backend: Some(BackendChoice::Sync),
            request_size: Some(4096),
            ..Settings::default()
        },
    ] {
        assert_eq!(accepted(&settings, &[]), Vec::new(), "{settings:?}");
    }
}

#[test]
fn files_beside_the_copy_must_be_writable_files() {
    let map = Settings {
        map: Some("/ro/m".into()),
        ..Settings::default()
    };
    let mut read_only = facts(E::File, E::File);
    read_only.beside.map = Some(Place {
        kind: None,
        unwritable: Some(Errno::ROFS),
    });
    assert_eq!(
        admit(&request(&["if=a", "of=b"], map.clone()), &read_only)
            .unwrap_err()
            .to_string(),
        "--map='/ro/m' cannot be written: Read-only file system"
    );
    let mut device = facts(E::File, E::File);
    device.beside.map = Some(Place {
        kind: Some(Kind::BlockDevice),
        unwritable: None,
    });
    assert_eq!(
        admit(&request(&["if=a", "of=b"], map), &device)
            .unwrap_err()
            .to_string(),
        "--map='/ro/m' is a block device, not a file ddx may write"
    );
    let hash_file = Settings {
        hash: vec![crate::integrity::Algorithm::Sha256],
        hash_file: Some("/ro/sums".into()),
        ..Settings::default()
    };
    let mut read_only = facts(E::File, E::File);
    read_only.beside.hash_file = Some(Place {
        kind: Some(Kind::RegularFile),
        unwritable: Some(Errno::ROFS),
    });
    assert_eq!(
        admit(&request(&["if=a", "of=b"], hash_file), &read_only)
            .unwrap_err()
            .to_string(),
        "--hash-file='/ro/sums' cannot be written: Read-only file system"
    );
    // The checkpoint beside an output on a read-only file system.
    let resume = Settings {
        resume: true,
        ..Settings::default()
    };
    let mut read_only = facts(E::File, E::File);
    read_only.beside.map = Some(Place {
        kind: None,
        unwritable: Some(Errno::ROFS),
    });
    assert_eq!(
        admit(&request(&["if=a", "of=/ro/b"], resume), &read_only)
            .unwrap_err()
            .to_string(),
        "--resume: its map '/ro/b.ddx-map' cannot be written: Read-only file system"
    );
}

/// Every option `--help` lists has a row (a new option must say what it
/// needs), and every row is an option or an operand ddx adds.
#[test]
fn the_table_has_a_row_for_every_option() {
    for option in crate::cli::options::OPTIONS {
        if matches!(option.name, "help" | "version") {
            continue;
        }
        let name = format!("--{}", option.name);
        assert!(
            TABLE.iter().any(|row| row.option == name),
            "{name} has no row in the needs table"
        );
    }
    for row in TABLE {
        assert!(
            row.option == "bs=auto"
                || crate::cli::options::OPTIONS
                    .iter()
                    .any(|o| format!("--{}", o.name) == row.option),
            "{} is in the table but not an option",
            row.option
        );
    }
}

/// Standard input is named '-' in the digest file, and its checker reads
/// it as such: a pipe or socket on standard input is accepted.
#[test]
fn hash_file_takes_standard_input_whatever_it_is() {
    let settings = Settings {
        hash: vec![crate::integrity::Algorithm::Sha256],
        hash_file: Some("sums".into()),
        ..Settings::default()
    };
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
