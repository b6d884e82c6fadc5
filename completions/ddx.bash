# bash completion for ddx: generated from src/cli/reference.rs, src/cli/options.rs and src/bench/args.rs by `DDX_REGENERATE=1 cargo test --lib docs`: do not edit
_ddx() {
    local word=${COMP_LINE:0:$COMP_POINT}
    word=${word##*[[:space:]]}
    # '=' splits words for readline: the reply replaces only what follows
    # it (or the '=' itself when nothing follows yet).
    local lead=""
    [[ ${COMP_WORDS[COMP_CWORD]} == "=" ]] && lead="="
    local key=${word%%=*} value=${word#*=} values="" list=0
    COMPREPLY=()
    # After "ddx bench" or "ddx gc": its options, and files for its
    # TARGET or INDEX operands.
    local bench=0 gc=0
    [[ ${COMP_WORDS[1]} == bench ]] && (( COMP_CWORD > 1 )) && bench=1
    [[ ${COMP_WORDS[1]} == gc ]] && (( COMP_CWORD > 1 )) && gc=1
    if [[ $word != *=* ]]; then
        local IFS=$' \t\n'
        if (( bench || gc )) && [[ $word != -* ]]; then
            IFS=$'\n'
            COMPREPLY=($(compgen -f -- "$word"))
            compopt -o filenames
            return
        elif (( bench )); then
            COMPREPLY=($(compgen -W "--tests= --size= --runs= --time-per-run= --latency-count= --latency-bs= --zones= --destructive --force --allow-memory --json --markdown --html= --help --version" -- "$word"))
        elif (( gc )); then
            COMPREPLY=($(compgen -W "--store= --min-age= --dry-run --help" -- "$word"))
        else
            COMPREPLY=($(compgen -W "bs= cbs= conv= count= ibs= if= iflag= obs= of= oflag= seek= skip= status= iseek= oseek= --backend= --queue-depth= --request-size= --offload --no-offload --keep-cache --drop-cache --rescue --map= --resume --sector-size= --retry-passes= --hash= --hash-file= --decompress --decompress= --no-decompress --compress= --bmap= --bmap-create= --used-only --tee= --verify --trim --fua --store --store= --seed= --chunk-size= --progress-fd= --verbose --force --help --version" -- "$word"))
            (( COMP_CWORD == 1 )) && COMPREPLY+=($(compgen -W "bench gc" -- "$word"))
        fi
        [[ ${COMPREPLY[0]} == *= ]] && compopt -o nospace
        return
    fi
    (( bench )) && key="bench $key"
    (( gc )) && key="gc $key"
    case "$key=" in
        if=|of=|--map=|--hash-file=|--bmap=|--bmap-create=|--tee=|--store=|--seed=|"bench --html="|"gc --store=") 
            local IFS=$'\n'
            COMPREPLY=($(compgen -f -- "$value"))
            COMPREPLY=("${COMPREPLY[@]/#/$lead}")
            compopt -o filenames
            return ;;
        conv=) values="ascii ebcdic ibm block unblock lcase ucase sparse swab noerror nocreat excl notrunc sync fdatasync fsync"; list=1 ;;
        iflag=|oflag=) values="append direct directory dsync noatime nocache noctty nofollow nonblock sync fullblock count_bytes skip_bytes seek_bytes"; list=1 ;;
        status=) values="none noxfer progress" ;;
        --backend=) values="auto sync threads uring"; list=0 ;;
        --sector-size=) values="512 1024 2048 4096 8192 16384 32768 65536"; list=0 ;;
        --hash=) values="sha256 blake3 xxh3"; list=1 ;;
        --decompress=) values="auto"; list=0 ;;
        --compress=) values="zstd xz gzip"; list=0 ;;
        bs=) values="auto" ;;
        "bench --tests=") values="seq-read seq-write bs-sweep latency qd-sweep zones"; list=1 ;;
        *) return ;;
    esac
    local done=""
    if (( list )) && [[ $value == *,* ]]; then
        done=${value%,*},
        value=${value##*,}
    fi
    local IFS=$' \t\n' symbol
    for symbol in $(compgen -W "$values" -- "$value"); do
        COMPREPLY+=("$lead$done$symbol")
    done
    (( list )) && compopt -o nospace
}
complete -F _ddx ddx
