# bash completion for ddx: generated from src/cli/reference.rs and src/cli/options.rs by `DDX_REGENERATE=1 cargo test --lib docs`: do not edit
_ddx() {
    local word=${COMP_LINE:0:$COMP_POINT}
    word=${word##*[[:space:]]}
    # '=' splits words for readline: the reply replaces only what follows
    # it (or the '=' itself when nothing follows yet).
    local lead=""
    [[ ${COMP_WORDS[COMP_CWORD]} == "=" ]] && lead="="
    local key=${word%%=*} value=${word#*=} values="" list=0
    COMPREPLY=()
    if [[ $word != *=* ]]; then
        local IFS=$' \t\n'
        COMPREPLY=($(compgen -W "bs= cbs= conv= count= ibs= if= iflag= obs= of= oflag= seek= skip= status= iseek= oseek= --backend= --queue-depth= --request-size= --offload --no-offload --keep-cache --rescue --map= --resume --sector-size= --hash= --hash-file= --verify --progress-fd= --verbose --force --help --version" -- "$word"))
        [[ ${COMPREPLY[0]} == *= ]] && compopt -o nospace
        return
    fi
    case "$key=" in
        if=|of=|--map=|--hash-file=) 
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
        bs=) values="auto" ;;
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
