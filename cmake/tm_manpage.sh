#!/bin/sh
# Writes tokenmill(1), a man page made from the binary's own --help texts (the top level, then
# every command), so the page lists exactly the flags the binary takes. Run at install time
# (cmake/tm_package.cmake); POSIX sh, sed and gzip only.
# Usage: tm_manpage.sh TOKENMILL_BINARY VERSION OUT.1.gz
set -eu
bin=$1 version=$2 out=$3
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
# roff: a backslash is \e; a line starting with . or ' would be a request.
# The usage lines name the binary as invoked: show it as `tokenmill`.
esc() { sed -e "s|$bin|tokenmill|g" -e 's/\\/\\e/g' -e "s/^\([.']\)/\\\\\&\1/"; }
section() {  # section TITLE ARGS...: the help of `tokenmill ARGS --help`, preformatted
  title=$1; shift
  printf '.SS "%s"\n.nf\n' "$title"
  env -u TOKENMILL_CONFIG "$bin" "$@" --help 2>&1 | esc
  printf '.fi\n'
}
{
  printf '.TH TOKENMILL 1 "" "tokenmill %s" "User Commands"\n' "$version"
  printf '.SH NAME\ntokenmill \\- an LLM inference server (OpenAI-compatible HTTP API) and toolkit\n'
  printf '.SH SYNOPSIS\n.B tokenmill\n.I COMMAND\n[\\fIOPTIONS\\fR]\n'
  printf '.SH DESCRIPTION\n.nf\n'
  env -u TOKENMILL_CONFIG "$bin" --help 2>&1 | esc
  printf '.fi\n.SH COMMANDS\n'
  # The command names: the lines of the top-level help's SUBCOMMANDS list.
  "$bin" --help 2>&1 | sed -n '/^Subcommands:/,$p' | sed -n 's/^  \([a-z][a-z-]*\) .*/\1/p' | while read -r cmd; do
    subs=$("$bin" "$cmd" --help 2>&1 | sed -n '/^Subcommands:/,$p' | sed -n 's/^  \([a-z][a-z-]*\) .*/\1/p')
    if [ -n "$subs" ]; then
      for sub in $subs; do section "tokenmill $cmd $sub" "$cmd" "$sub"; done
    else
      section "tokenmill $cmd" "$cmd"
    fi
  done
  cat <<'ROFF'
.SH ENVIRONMENT
.TP
.B TOKENMILL_\fIFLAG\fR
Every option of \fBtokenmill serve\fR, by its long name in capitals with _ for -:
\fB\-\-max\-model\-len 4096\fR is \fBTOKENMILL_MAX_MODEL_LEN=4096\fR; a flag takes 1/true or 0/false.
The command line wins over the environment, which wins over a \fB\-\-config\fR file.
.TP
.B TOKENMILL_CONFIG
The \fB\-\-config\fR YAML file of \fBtokenmill serve\fR when the command line names none.
.TP
.B TOKENMILL_API_KEY
An API key \fBtokenmill serve\fR requires, added to those of \fB\-\-api\-key\fR.
.TP
.B TOKENMILL_DEFAULT_MODEL
The model used where \fB\-\-model\fR is optional (default: the bundled stories260K).
.TP
.B TOKENMILL_ISA
Limit the CPU instruction-set path: scalar, avx2 or avx512.
.SH FILES
.TP
.I /etc/tokenmill/config.yaml
The packaged service's options (\fB\-\-config\fR format).
.TP
.I /etc/default/tokenmill
The packaged service's environment (TOKENMILL_* variables).
.TP
.I /usr/share/tokenmill/models/stories260K/stories260K.gguf
The bundled default model.
.SH SEE ALSO
/usr/share/doc/tokenmill/ (README.md, server.md, deploy.md)
ROFF
} > "$tmp"
gzip -9n < "$tmp" > "$out"
