//! The case model: everything one differential run needs, as plain data.
//!
//! A case says what the working directory holds before the run, which
//! operands are passed, where stdin comes from and whether a shell wrapper is
//! involved. It says nothing about what should happen: GNU dd decides that.
//! Keeping cases as data (not closures) lets the runner replay them for both
//! programs and lets the reporter print a shell command that reproduces them.

/// One thing placed in the working directory before the run.
#[derive(Clone, Debug)]
pub enum Entry {
    File { name: String, bytes: Vec<u8> },
    Symlink { name: String, target: String },
    Dir { name: String },
}

/// Where the program's standard input comes from.
#[derive(Clone, Debug)]
pub enum Stdin {
    /// `/dev/null`: cases that name `if=` must not block on a terminal.
    Null,
    /// `< name`, a regular file in the working directory, so skip= can lseek
    /// and what follows count= stays for the next reader.
    File(String),
    /// A pipe that already holds all the bytes (at most one pipe buffer) and
    /// is closed: every read sees everything that is left, deterministically.
    Pipe(Vec<u8>),
    /// A pipe fed one chunk at a time; the next chunk is written only once the
    /// reader has drained the previous one, so short reads happen at exactly
    /// the chunk boundaries on every run.
    Chunks(Vec<Vec<u8>>),
    /// A pipe written as fast as the reader takes it, for inputs larger than
    /// a pipe buffer. Read sizes then depend on scheduling, so generated cases
    /// use it only with iflag=fullblock, which makes records deterministic.
    Stream(Vec<u8>),
    /// A pipe given `before`, then (once the program has drained it and is
    /// blocked reading) the signal, then `after` and EOF. Only for cases
    /// without a shell wrapper: the signal goes to the program itself.
    Signalled {
        before: Vec<u8>,
        signal: Signal,
        after: Vec<u8>,
    },
}

/// The signals dd gives meaning to.
#[derive(Clone, Copy, Debug)]
pub enum Signal {
    /// Print the statistics so far and carry on.
    Usr1,
    /// Print the statistics and die of the signal.
    Int,
}

impl Signal {
    pub fn name(self) -> &'static str {
        match self {
            Signal::Usr1 => "USR1",
            Signal::Int => "INT",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Case {
    /// Which generator flavour or fixed-table entry this is; failures are
    /// grouped by it.
    pub label: String,
    pub entries: Vec<Entry>,
    pub operands: Vec<String>,
    pub stdin: Stdin,
    /// A `sh -c` script wrapping the program, for redirections and for
    /// "what is left for the next reader" checks. `"$DD"` is the program and
    /// `"$@"` the operands.
    pub shell: Option<String>,
}

impl Case {
    pub fn new(label: impl Into<String>) -> Case {
        Case {
            label: label.into(),
            entries: Vec::new(),
            operands: Vec::new(),
            stdin: Stdin::Null,
            shell: None,
        }
    }

    pub fn file(mut self, name: &str, bytes: impl Into<Vec<u8>>) -> Case {
        self.entries.push(Entry::File {
            name: name.to_string(),
            bytes: bytes.into(),
        });
        self
    }

    pub fn symlink(mut self, name: &str, target: &str) -> Case {
        self.entries.push(Entry::Symlink {
            name: name.to_string(),
            target: target.to_string(),
        });
        self
    }

    pub fn dir(mut self, name: &str) -> Case {
        self.entries.push(Entry::Dir {
            name: name.to_string(),
        });
        self
    }

    pub fn args(mut self, operands: &[&str]) -> Case {
        self.operands.extend(operands.iter().map(|s| s.to_string()));
        self
    }

    pub fn stdin(mut self, stdin: Stdin) -> Case {
        self.stdin = stdin;
        self
    }

    pub fn shell(mut self, script: &str) -> Case {
        self.shell = Some(script.to_string());
        self
    }

    /// O_DIRECT cases are skipped where the filesystem refuses O_DIRECT,
    /// because there both programs fail for a reason unrelated to dd.
    pub fn uses_direct(&self) -> bool {
        self.operands.iter().any(|op| {
            (op.starts_with("iflag=") || op.starts_with("oflag=")) && op.contains("direct")
        })
    }
}

/// Quote for POSIX sh, only when needed, so reproduction commands stay
/// readable for the common `bs=4` style operands.
pub fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"=,._/+-:@%".contains(&b));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}
