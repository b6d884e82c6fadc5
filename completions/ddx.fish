# fish completion for ddx: generated from src/cli/reference.rs, src/cli/options.rs and src/bench/args.rs by `DDX_REGENERATE=1 cargo test --lib docs`: do not edit

complete -c ddx -f

# A comma-separated list after --option= or operand=: complete its last item.
function __ddx_list
    set -l value (string replace -r '^[^=]*=' '' -- (commandline -ct))
    set -l done (string replace -r '[^,]*$' '' -- $value)
    for word in $argv
        echo $done$word
    end
end
complete -c ddx -n 'not __fish_seen_subcommand_from bench gc' -l backend -x -a 'auto sync threads uring' -d 'how reads and writes overlap: \'auto\''
complete -c ddx -n 'not __fish_seen_subcommand_from bench gc' -l queue-depth -x -d 'records'
complete -c ddx -n 'not __fish_seen_subcommand_from bench gc' -l request-size -x -d 'where records are decoupled from requests'
complete -c ddx -n 'not __fish_seen_subcommand_from bench gc' -l offload -d 'hand file-to-file copies to copy_file_range wherever the kernel takes'
complete -c ddx -n 'not __fish_seen_subcommand_from bench gc' -l no-offload -d 'copy through ddx\'s own buffers, never with copy_file_range or splice'
complete -c ddx -n 'not __fish_seen_subcommand_from bench gc' -l keep-cache -d 'leave the copy\'s data in the page cache, as cp and dd do'
complete -c ddx -n 'not __fish_seen_subcommand_from bench gc' -l drop-cache -d 'drop the pages the copy brings into the page cache behind it, from its'
complete -c ddx -n 'not __fish_seen_subcommand_from bench gc' -l rescue -d 'read a failing input as GNU ddrescue does: the good areas first, in re'
complete -c ddx -n 'not __fish_seen_subcommand_from bench gc' -l map -r -F -d 'keep a GNU ddrescue mapfile of what is copied and what is bad, saved t'
complete -c ddx -n 'not __fish_seen_subcommand_from bench gc' -l resume -d 'continue an interrupted copy from its map'
complete -c ddx -n 'not __fish_seen_subcommand_from bench gc' -l sector-size -x -a '512 1024 2048 4096 8192 16384 32768 65536' -d 'the retry unit of --rescue'
complete -c ddx -n 'not __fish_seen_subcommand_from bench gc' -l retry-passes -x -d 'a rescue'
complete -c ddx -n 'not __fish_seen_subcommand_from bench gc' -l hash -x -a '(__ddx_list sha256 blake3 xxh3)' -d 'digest what is copied, alongside the copy, and print it with the stati'
complete -c ddx -n 'not __fish_seen_subcommand_from bench gc' -l hash-file -r -F -d 'also write the --hash digest'
complete -c ddx -n 'not __fish_seen_subcommand_from bench gc' -l decompress -a 'auto' -d 'the input is compressed'
complete -c ddx -n 'not __fish_seen_subcommand_from bench gc' -l no-decompress -d 'copy a compressed input as the bytes it is, as GNU dd does, also onto'
complete -c ddx -n 'not __fish_seen_subcommand_from bench gc' -l compress -x -a 'zstd xz gzip' -d 'write the output compressed, on every core: zstd'
complete -c ddx -n 'not __fish_seen_subcommand_from bench gc' -l bmap -r -F -d 'bmaptool\'s block map of the input image'
complete -c ddx -n 'not __fish_seen_subcommand_from bench gc' -l bmap-create -r -F -d 'write a block map of the input, as bmaptool makes them, to FILE: its d'
complete -c ddx -n 'not __fish_seen_subcommand_from bench gc' -l used-only -d 'read only the blocks that the input disk\'s file systems use, from its'
complete -c ddx -n 'not __fish_seen_subcommand_from bench gc' -l tee -r -F -d 'also write the output to FILE'
complete -c ddx -n 'not __fish_seen_subcommand_from bench gc' -l verify -d 'after the copy, read the output back'
complete -c ddx -n 'not __fish_seen_subcommand_from bench gc' -l trim -d 'discard on the output, instead of writing them, the output blocks that'
complete -c ddx -n 'not __fish_seen_subcommand_from bench gc' -l fua -d 'onto a SCSI or NVMe generic device'
complete -c ddx -n 'not __fish_seen_subcommand_from bench gc' -l store -F -d 'the chunk store of a casync blob index, the end named *.caibx: with of'
complete -c ddx -n 'not __fish_seen_subcommand_from bench gc' -l seed -r -F -d 'extracting an index'
complete -c ddx -n 'not __fish_seen_subcommand_from bench gc' -l chunk-size -x -d 'making an index: the average chunk size'
complete -c ddx -n 'not __fish_seen_subcommand_from bench gc' -l progress-fd -x -d 'write progress as JSON, one object per line, to file descriptor FD abo'
complete -c ddx -n 'not __fish_seen_subcommand_from bench gc' -l verbose -d 'after the statistics, say how the copy ran: backend, request size, que'
complete -c ddx -n 'not __fish_seen_subcommand_from bench gc' -l force -d 'write even where the guard refuses: a mounted, swap or held block devi'
complete -c ddx -n 'not __fish_seen_subcommand_from bench gc' -l help -d 'display this help and exit'
complete -c ddx -n 'not __fish_seen_subcommand_from bench gc' -l version -d 'output version information and exit'

complete -c ddx -n '__fish_use_subcommand' -a bench -d 'measure a disk'
complete -c ddx -n '__fish_seen_subcommand_from bench' -l tests -x -a '(__ddx_list seq-read seq-write bs-sweep latency qd-sweep zones)' -d 'the tests to run, comma-separated'
complete -c ddx -n '__fish_seen_subcommand_from bench' -l size -x -d 'the working set, at least 1M'
complete -c ddx -n '__fish_seen_subcommand_from bench' -l runs -x -d 'measured runs per figure, 1 to 100, after one warm-up'
complete -c ddx -n '__fish_seen_subcommand_from bench' -l time-per-run -x -d 'the time limit of one run of a bs-sweep size or a queue depth'
complete -c ddx -n '__fish_seen_subcommand_from bench' -l latency-count -x -d 'synchronous writes and reads per run of the latency test, 1 to 1000000'
complete -c ddx -n '__fish_seen_subcommand_from bench' -l latency-bs -x -d 'the request size of the latency test, a multiple of the target\'s O_DIR'
complete -c ddx -n '__fish_seen_subcommand_from bench' -l zones -x -d 'offsets measured by the zones test, 2 to 1024'
complete -c ddx -n '__fish_seen_subcommand_from bench' -l destructive -d 'allow the write tests on a block device, a disk\'s generic node or an e'
complete -c ddx -n '__fish_seen_subcommand_from bench' -l force -d 'measure even where the copy\'s guard refuses, as the copy\'s --force doe'
complete -c ddx -n '__fish_seen_subcommand_from bench' -l allow-memory -d 'measure a target with no disk under it'
complete -c ddx -n '__fish_seen_subcommand_from bench' -l json -d 'print the report as JSON'
complete -c ddx -n '__fish_seen_subcommand_from bench' -l markdown -d 'print the report as Markdown tables, for pasting into an issue'
complete -c ddx -n '__fish_seen_subcommand_from bench' -l html -r -F -d 'also write a self-contained HTML report with charts to FILE'
complete -c ddx -n '__fish_seen_subcommand_from bench' -l help -d 'display this help and exit'
complete -c ddx -n '__fish_seen_subcommand_from bench' -l version -d 'output version information and exit'
complete -c ddx -n '__fish_seen_subcommand_from bench; and not string match -q -- "-*" (commandline -ct)' -F

complete -c ddx -n '__fish_use_subcommand' -a gc -d 'remove the chunks no index names'
complete -c ddx -n '__fish_seen_subcommand_from gc' -l store -r -F -d 'the chunk store to collect: a directory or s3://BUCKET[/PREFIX]'
complete -c ddx -n '__fish_seen_subcommand_from gc' -l min-age -x -d 'keep every chunk stored less than SECONDS ago, named or not'
complete -c ddx -n '__fish_seen_subcommand_from gc' -l dry-run -d 'say what would be removed, and remove nothing'
complete -c ddx -n '__fish_seen_subcommand_from gc' -l help -d 'display this help and exit'
complete -c ddx -n '__fish_seen_subcommand_from gc; and not string match -q -- "-*" (commandline -ct)' -F

function __ddx_operand
    set -l token (commandline -ct)
    set -l key (string split -m 1 = -- $token)[1]
    set -l value (string replace -r '^[^=]*=' '' -- $token)
    switch "$key="
        case if= of=
            for path in (__fish_complete_path $value)
                echo $key=$path
            end
            return
        case conv=
            set symbols ascii ebcdic ibm block unblock lcase ucase sparse swab noerror nocreat excl notrunc sync fdatasync fsync
        case iflag= oflag=
            set symbols append direct directory dsync noatime nocache noctty nofollow nonblock sync fullblock count_bytes skip_bytes seek_bytes
        case status=
            for level in none noxfer progress
                echo $key=$level
            end
            return
        case bs=
            for word in auto
                echo $key=$word
            end
            return
        case '*'
            if string match -q -- '*=*' $token
                return
            end
            printf '%s\t%s\n' bs= 'read and write up to BYTES bytes at a time'
            printf '%s\t%s\n' cbs= 'convert BYTES bytes at a time'
            printf '%s\t%s\n' conv= 'convert the file as per the comma separated symbol list'
            printf '%s\t%s\n' count= 'copy only N input blocks'
            printf '%s\t%s\n' ibs= 'read up to BYTES bytes at a time'
            printf '%s\t%s\n' if= 'read from FILE instead of stdin'
            printf '%s\t%s\n' iflag= 'read as per the comma separated symbol list'
            printf '%s\t%s\n' obs= 'write BYTES bytes at a time'
            printf '%s\t%s\n' of= 'write to FILE instead of stdout'
            printf '%s\t%s\n' oflag= 'write as per the comma separated symbol list'
            printf '%s\t%s\n' seek= ''
            printf '%s\t%s\n' skip= ''
            printf '%s\t%s\n' status= 'The LEVEL of information to print to stderr'
            return
    end
    # A comma-separated list: complete its last item.
    set -l done (string replace -r '[^,]*$' '' -- $value)
    for symbol in $symbols
        echo $key=$done$symbol
    end
end

complete -c ddx -n 'not __fish_seen_subcommand_from bench gc; and not string match -q -- "-*" (commandline -ct)' -a '(__ddx_operand)'
