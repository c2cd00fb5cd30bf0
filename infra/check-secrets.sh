#!/bin/sh
# Refuses to start the stack on the placeholder secrets of infra/.env.example.
#   check-secrets.sh VAR...    # exit 1 with one line naming every VAR that is empty or change-me*
bad=""
for name in "$@"; do
    case "$name" in
        "" | [0-9]* | *[!A-Za-z0-9_]*) echo "error: '$name' is not a variable name" >&2; exit 2 ;;
    esac
    eval "value=\${$name-}"
    case "$value" in
        "" | change-me*) bad="${bad:+$bad, }$name" ;;
    esac
done
if [ -n "$bad" ]; then
    echo "error: $bad in infra/.env: empty or still the change-me placeholder of .env.example; set a real secret" >&2
    exit 1
fi
