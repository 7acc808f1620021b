#!/usr/bin/env bash
# Glewlwyd (Debian's OpenID Connect / OAuth 2 server), for the tests that check Catena
# against an authorization server the project did not write. Two steps, so that the
# test process itself starts (and later kills) the server:
#
#   scripts/glewlwyd.sh prepare DIR PORT     a fresh SQLite database, a signing key, the config
#   glewlwyd -c DIR/glewlwyd.conf            (started by the test)
#   scripts/glewlwyd.sh configure DIR PORT REDIRECT_URI
#       waits for the server, then registers through its admin API: the OpenID plugin,
#       a confidential client (client credentials), a public client (code + PKCE, refresh
#       with rotation, device grant; REDIRECT_URI compared exactly) and a user; prints
#       KEY=value lines.
#
# Needs glewlwyd, sqlite3, jq, openssl and curl (.ci/run installs them).
set -euo pipefail

step="$1" dir="$2" port="$3"
base="http://127.0.0.1:$port"
issuer="$base/api/oidc"
log() { echo "glewlwyd.sh: $*" >&2; }

if [[ "$step" == prepare ]]; then
  for tool in glewlwyd sqlite3 jq openssl curl; do
    command -v "$tool" >/dev/null || { log "$tool is not installed: apt-get install glewlwyd sqlite3 jq openssl curl"; exit 1; }
  done
  rm -rf "$dir" && mkdir -p "$dir"
  # The schema, where Debian puts it (images that strip /usr/share/doc keep dbconfig's copy).
  if [[ -f /usr/share/doc/glewlwyd/database/init.sqlite3.sql.gz ]]; then
    zcat /usr/share/doc/glewlwyd/database/init.sqlite3.sql.gz | sqlite3 "$dir/glewlwyd.db"
  else
    sqlite3 "$dir/glewlwyd.db" </usr/share/dbconfig-common/data/glewlwyd/install/sqlite3
  fi
  openssl genrsa -out "$dir/key.pem" 2048 2>/dev/null
  openssl rsa -in "$dir/key.pem" -pubout -out "$dir/public.pem" 2>/dev/null
  # The secure_connection_* lines must be there even with TLS off, or it does not start.
  cat >"$dir/glewlwyd.conf" <<EOF
port=$port
bind_address="127.0.0.1"
external_url="$base"
login_url="login.html"
static_files_path="/usr/share/glewlwyd/webapp/"
api_prefix="api"
allow_origin="*"
log_mode="file"
log_level="WARNING"
log_file="$dir/glewlwyd.log"
cookie_secure=0
session_expiration=3600
session_key="GLEWLWYD2_SESSION_ID"
admin_session_authentication="cookie"
profile_session_authentication="cookie"
allow_multiple_user_per_session=true
login_api_enabled=true
max_post_size=1048576
admin_scope="g_admin"
profile_scope="g_profile"
user_module_path="/usr/lib/glewlwyd/user"
client_module_path="/usr/lib/glewlwyd/client"
user_auth_scheme_module_path="/usr/lib/glewlwyd/scheme"
plugin_module_path="/usr/lib/glewlwyd/plugin"
use_secure_connection=false
secure_connection_key_file="/etc/glewlwyd/cert.key"
secure_connection_pem_file="/etc/glewlwyd/cert.pem"
secure_connection_ca_file="/etc/glewlwyd/ca.crt"
hash_algorithm="SHA512"
database = { type = "sqlite3"; path = "$dir/glewlwyd.db"; };
EOF
  exit 0
fi

[[ "$step" == configure ]] || { log "unknown step $step"; exit 64; }
redirect_uri="$4"
# Polled: the server answers within a few seconds of starting.
ready() {
  local deadline=$((SECONDS + 30))
  until curl -fsS -o /dev/null "$1" 2>/dev/null; do
    [[ $SECONDS -lt $deadline ]] || { log "no answer from $1 in 30 s"; cat "$dir/glewlwyd.log" >&2 || true; exit 1; }
    sleep 0.1
  done
}
ready "$base/config"

cookies="$dir/admin.cookies"
api() { # METHOD PATH JSON
  local code
  code=$(curl -sS -o "$dir/answer.json" -w '%{http_code}' -b "$cookies" -c "$cookies" -X "$1" \
    -H 'Content-Type: application/json' --data "${3:-}" "$base/api$2")
  [[ "$code" == 200 ]] || { log "$1 $2 answered $code: $(cat "$dir/answer.json")"; exit 1; }
}
api POST /auth '{"username":"admin","password":"password"}'   # the schema's initial administrator
api POST /scope/ '{"name":"catena","display_name":"Catena","description":"Catena tests","password_required":false}'
api POST /scope/ '{"name":"offline_access","display_name":"Offline","description":"Refresh tokens","password_required":false}'

parameters=$(jq -n --arg iss "$issuer" --rawfile key "$dir/key.pem" --rawfile cert "$dir/public.pem" '{
  iss: $iss, "jwt-type": "rsa", "jwt-key-size": "256", key: $key, cert: $cert,
  "access-token-duration": 3600, "refresh-token-duration": 1209600, "code-duration": 600,
  "refresh-token-rolling": true, "refresh-token-one-use": "always",
  "client-refresh-token-one-use-parameter": "refresh-token-one-use", "allow-non-oidc": true,
  "auth-type-code-enabled": true, "auth-type-token-enabled": false, "auth-type-id-token-enabled": true,
  "auth-type-none-enabled": true, "auth-type-password-enabled": false, "auth-type-client-enabled": true,
  "auth-type-device-enabled": true, "auth-type-refresh-enabled": true,
  "pkce-allowed": true, "pkce-method-plain-allowed": false,
  "introspection-revocation-allowed": true, "introspection-revocation-auth-scope": [],
  "introspection-revocation-allow-target-client": true,
  "device-authorization-expiration": 600, "device-authorization-interval": 1,
  "jwks-show": true, "subject-type": "public", scope: [], "additional-parameters": [], claims: [],
  "request-parameter-allow": false, "session-management-allowed": false
}')
api POST /mod/plugin/ "$(jq -n --argjson p "$parameters" '{module:"oidc",name:"oidc",display_name:"OIDC",enabled:true,order_rank:0,parameters:$p}')"
api POST /client/ "$(jq -n '{client_id:"catena-confidential", name:"Catena confidential", client_secret:"catena-secret",
  confidential:true, token_endpoint_auth_method:["client_secret_basic","client_secret_post"], enabled:true, redirect_uri:[],
  scope:["catena"], authorization_type:["client_credentials","delete_token"]}')"
api POST /client/ "$(jq -n --arg r "$redirect_uri" '{client_id:"catena-public", name:"Catena public", confidential:false,
  enabled:true, redirect_uri:[$r], authorization_type:["code","refresh_token","device_authorization","delete_token"]}')"
api POST /user/ '{"username":"alice","password":"alice-password","name":"Alice","email":"alice@example.test","enabled":true,"scope":["openid","catena","offline_access","g_profile"]}'
ready "$issuer/.well-known/openid-configuration"
echo "ISSUER=$issuer"
