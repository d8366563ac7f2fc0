#!/usr/bin/env bash
# Checks every relative link of README.md and docs/*.md (or of the files given): the file or
# folder it names exists in the repository, and a "#fragment" into a Markdown file names one
# of its headings (GitHub's anchors: lower case, punctuation dropped, spaces to hyphens, -1, -2
# for repeats). External links (http:, https:, mailto:) are not fetched. Prints each broken
# link with its file and line, then a count; exits 1 if any is broken.
set -euo pipefail
cd "$(dirname "$0")/.."
export LC_ALL=C.UTF-8

if (($#)); then files=("$@"); else files=(README.md docs/*.md); fi

# anchors FILE: the heading anchors of a Markdown file, one a line (fenced code skipped).
anchors() {
  awk '/^```/{c=!c; next} !c && /^#+ /' "$1" |
    sed -E 's/^#+ +//; s/ +#*$//' |
    sed -E 's/\[([^]]*)\]\([^)]*\)/\1/g' | # a link in a heading keeps its text
    tr '[:upper:]' '[:lower:]' |
    sed -E 's/[^[:alnum:] _-]//g; s/ /-/g' |
    awk '{ if (seen[$0]++) print $0 "-" seen[$0]-1; else print }'
}

bad=0 n=0
for f in "${files[@]}"; do
  dir=$(dirname "$f")
  # "LINENO<TAB>target" of every ](target) outside fenced code.
  while IFS=$'\t' read -r lineno target; do
    [[ -z "$target" ]] && continue
    case "$target" in http:* | https:* | mailto:*) continue ;; esac
    n=$((n + 1))
    path=${target%%#*} frag=
    [[ "$target" == *#* ]] && frag=${target#*#}
    if [[ -z "$path" ]]; then resolved=$f; else resolved=$dir/$path; fi
    if [[ ! -e "$resolved" ]]; then
      echo "$f:$lineno: link to $target: no such file ($resolved)" >&2; bad=$((bad + 1)); continue
    fi
    if [[ -n "$frag" && "$resolved" == *.md ]] && ! anchors "$resolved" | grep -qxF -- "$frag"; then
      echo "$f:$lineno: link to $target: $resolved has no heading with the anchor #$frag" >&2
      bad=$((bad + 1))
    fi
  done < <(awk '/^```/{c=!c; next} !c {
      s = $0
      while (match(s, /\]\([^) ]+\)/)) {
        print NR "\t" substr(s, RSTART + 2, RLENGTH - 3)
        s = substr(s, RSTART + RLENGTH)
      }
    }' "$f")
done
if ((bad)); then
  echo "doc links: $bad of $n relative links broken" >&2
  exit 1
fi
echo "doc links: $n relative links in ${#files[@]} files resolve"
