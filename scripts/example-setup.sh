#!/usr/bin/env bash
# Prepares a store for the bundled example factories, idempotently: the
# signing secrets their webhooks name, and the webhook UIDs their
# automations select (a new store would otherwise give them random UIDs).
# Usage: scripts/example-setup.sh FACTORY_BINARY DATA_DIR
set -euo pipefail
bin=${1:?factory binary}
data=${2:?data directory}

have_secret() { "$bin" --data "$data" secrets list --output json 2>/dev/null | grep -q "\"name\": \"$1\""; } # a new store has none

if ! have_secret github-webhook-secret; then
  printf 'example-github-secret-change-me' | "$bin" --data "$data" secrets create github-webhook-secret --from-stdin
fi
if ! have_secret stripe-signing-secret; then
  printf 'whsec_example_stripe_secret_change_me' | "$bin" --data "$data" secrets create stripe-signing-secret --from-stdin
fi
if ! have_secret deploys-signing-secret; then
  printf 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' | "$bin" --data "$data" secrets create deploys-signing-secret --from-stdin
fi
"$bin" --data "$data" webhooks import example/github --uid wh_example0github00000001 >/dev/null
"$bin" --data "$data" webhooks import example/stripe --uid wh_example0stripe00000001 >/dev/null
"$bin" --data "$data" webhooks import widgets/deploys --uid wh_widgets0deploys0000001 >/dev/null
