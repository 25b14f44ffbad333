#!/usr/bin/env bash
# tests/s3/creds.sh MEMWALFS CREDSERVER_PY - S3 credentials from the AWS chain on real mounts of
# the S3 test server (Ceph RGW with its STS, as tools/s3-server.sh sets it up):
#  1. a profile with role_arn + source_profile: STS AssumeRole at the S3 endpoint, the mount
#     works with the temporary keys; a role that does not exist fails the mount with STS's
#     error and no secret in the message; a web identity request reaches RGW's STS (which
#     refuses the made-up token: no OIDC provider is registered) and its answer is reported;
#  2. container credentials from credserver.py that mints real temporary credentials of the
#     server (AssumeRole) but says they expire after 6 s: the mount keeps working over ~25 s
#     of writes and fsyncs while the keys are refreshed again and again (the server counts the
#     hand-outs; the daemon logs each refresh);
#  3. no secret (the tester's, or any handed out) appears in the daemon's log (debug level),
#     in ps, or in the daemon's command line.
# SKIP without FUSE, S3_ENDPOINT or S3_ROLE_ARN (an S3 server without STS).
set -euo pipefail
MW=$1
SERVER_PY=$2
. "$(dirname "$0")/../fs/lib.sh" "$MW" s3
[ -n "${S3_ROLE_ARN:-}" ] || { echo "SKIP: S3_ROLE_ARN unset (no STS on the S3 server)"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
TESTER_SECRET=$AWS_SECRET_ACCESS_KEY
SRV_PID=
stop_srv() {
	if [ -n "$SRV_PID" ]; then
		kill "$SRV_PID" 2>/dev/null || true
		wait "$SRV_PID" 2>/dev/null || true
	fi
	SRV_PID=
}
trap 'stop_srv; mw_cleanup' EXIT

# fg_mount LOG MOUNTPOINT ENV... -- ARGS...: a foreground daemon (its log in LOG) in the
# background, with the environment reduced to the given variables; waits for the mount.
fg_mount() {
	local log=$1 mnt=$2
	shift 2
	local envs=()
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	mkdir -p "$mnt"
	env -i PATH="$PATH" HOME="$WORK" MEMWALFS_LOG=debug AWS_EC2_METADATA_DISABLED=true \
		AWS_CONFIG_FILE="$WORK/none" AWS_SHARED_CREDENTIALS_FILE="$WORK/none" "${envs[@]}" \
		"$MW" mount -f --pidfile "$mnt.pid" "${STORE_OPTS[@]}" "$@" "$STORE" "$mnt" >"$log" 2>&1 &
	MOUNTS+=("$mnt")
	for _ in $(seq 300); do
		mountpoint -q "$mnt" && return 0
		kill -0 $! 2>/dev/null || { cat "$log"; echo "FAIL: the mount exited"; return 1; }
		sleep 0.1
	done
	cat "$log"
	echo "FAIL: no mount at $mnt"
	return 1
}

fg_umount() {
	fusermount3 -u "$1"
	mw_wait_exit "$1.pid"
}

echo "== 1. role_arn + source_profile: STS AssumeRole"
cat >"$WORK/config" <<CONF
[profile base]
aws_access_key_id = $AWS_ACCESS_KEY_ID
aws_secret_access_key = $AWS_SECRET_ACCESS_KEY
[profile tester-role]
role_arn = $S3_ROLE_ARN
source_profile = base
role_session_name = creds-test
[profile no-role]
role_arn = arn:aws:iam:::role/memwalfs-no-such-role
source_profile = base
CONF
fg_mount "$WORK/role.log" "$WORK/m1" AWS_CONFIG_FILE="$WORK/config" -- --profile tester-role
echo "assumed" >"$WORK/m1/f0"
[ "$(cat "$WORK/m1/f0")" = assumed ]
fg_umount "$WORK/m1"
grep -q "credentials from profile tester-role: role $S3_ROLE_ARN" "$WORK/role.log" ||
	{ cat "$WORK/role.log"; echo "FAIL: the role was not used"; exit 1; }
if grep -qF "$TESTER_SECRET" "$WORK/role.log"; then echo "FAIL: a secret in the log"; exit 1; fi
echo "   mounted with the role's temporary keys"
set +e
env -i PATH="$PATH" HOME="$WORK" AWS_EC2_METADATA_DISABLED=true AWS_CONFIG_FILE="$WORK/config" \
	"$MW" mount --profile no-role "${STORE_OPTS[@]}" "$STORE" "$WORK/m1" >"$WORK/norole.out" 2>&1
rc=$?
set -e
cat "$WORK/norole.out"
[ $rc = 1 ] || { echo "FAIL: a missing role mounted (exit $rc)"; exit 1; }
grep -q "STS at $S3_ENDPOINT/ answered HTTP" "$WORK/norole.out" || { echo "FAIL: no STS error"; exit 1; }
if grep -qF "$TESTER_SECRET" "$WORK/norole.out"; then echo "FAIL: a secret in the error"; exit 1; fi
# the same through mount options (fstab lines): -o profile=, sts_endpoint=
set +e
env -i PATH="$PATH" HOME="$WORK" AWS_EC2_METADATA_DISABLED=true AWS_CONFIG_FILE="$WORK/config" \
	"$MW" mount -o "profile=no-role,sts_endpoint=$S3_ENDPOINT" "${STORE_OPTS[@]}" "$STORE" \
	"$WORK/m1" >"$WORK/norole-o.out" 2>&1
rc=$?
set -e
[ $rc = 1 ] && grep -q "STS at $S3_ENDPOINT/ answered HTTP" "$WORK/norole-o.out" ||
	{ cat "$WORK/norole-o.out"; echo "FAIL: -o profile= did not reach the chain"; exit 1; }
echo "   -o profile=,sts_endpoint= reach the credential chain"

echo "== 1b. web identity: the AssumeRoleWithWebIdentity request reaches RGW's STS"
# (no OIDC provider is registered on the test server, so STS refuses the token; a full
# success path needs CreateOpenIDConnectProvider, a JWKS server and an RS256 token)
echo "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJ4In0.c2ln" >"$WORK/wi-token"
set +e
env -i PATH="$PATH" HOME="$WORK" AWS_EC2_METADATA_DISABLED=true \
	AWS_WEB_IDENTITY_TOKEN_FILE="$WORK/wi-token" AWS_ROLE_ARN="$S3_ROLE_ARN" \
	"$MW" mount "${STORE_OPTS[@]}" "$STORE" "$WORK/m1" >"$WORK/wi.out" 2>&1
rc=$?
set -e
cat "$WORK/wi.out"
[ $rc = 1 ] && grep -q "web identity: role $S3_ROLE_ARN): STS at $S3_ENDPOINT/ answered HTTP 4" \
	"$WORK/wi.out" || { echo "FAIL: no STS answer to the web identity request"; exit 1; }
if grep -qF "eyJhbGciOiJSUzI1NiJ9" "$WORK/wi.out"; then echo "FAIL: the token in the error"; exit 1; fi

echo "== 2. container credentials that expire every 6 s, refreshed under a working mount"
python3 "$SERVER_PY" "$WORK/port" "$WORK/srv.log" --mint --lifetime 6 --secrets "$WORK/secrets" &
SRV_PID=$!
for _ in $(seq 100); do [ -s "$WORK/port" ] && break; sleep 0.1; done
URL="http://127.0.0.1:$(cat "$WORK/port")/container/creds"
fg_mount "$WORK/refresh.log" "$WORK/m2" AWS_CONTAINER_CREDENTIALS_FULL_URI="$URL" --
DPID=$(cat "$WORK/m2.pid")
start=$(date +%s)
i=0
while [ $(($(date +%s) - start)) -lt 25 ]; do
	i=$((i + 1))
	head -c $((4096 + i * 1000)) /dev/urandom >"$WORK/src.$i"
	dd if="$WORK/src.$i" of="$WORK/m2/f$i" bs=64k conv=fsync status=none
	cmp "$WORK/src.$i" "$WORK/m2/f$i"
	sleep 0.5
done
issued=$(grep -c ISSUED "$WORK/srv.log")
refreshed=$(grep -c "refreshed: access key" "$WORK/refresh.log" || true)
echo "   $i files written with fsync over 25 s; the server handed out $issued sets of keys," \
	"the daemon logged $refreshed refreshes"
[ "$issued" -ge 4 ] && [ "$refreshed" -ge 3 ] || { echo "FAIL: too few refreshes"; exit 1; }
grep -q "refresh failed" "$WORK/refresh.log" && { echo "FAIL: a refresh failed"; exit 1; }
# every daemon log line naming an access key names one the server handed out
for ak in $(grep -o 'access key [A-Za-z0-9]*' "$WORK/refresh.log" | awk '{print $3}' | sort -u); do
	grep -q "ISSUED $ak" "$WORK/srv.log" || { echo "FAIL: key $ak was not handed out"; exit 1; }
done

echo "== 3. no secret in the log, in ps or in the daemon's command line"
ps -eo args >"$WORK/ps.out"
tr '\0' ' ' <"/proc/$DPID/cmdline" >"$WORK/cmdline"
echo "$TESTER_SECRET" >>"$WORK/secrets"
for f in "$WORK/refresh.log" "$WORK/ps.out" "$WORK/cmdline" "$WORK/srv.log"; do
	if grep -qF -f "$WORK/secrets" "$f"; then echo "FAIL: a secret in $f"; exit 1; fi
done
echo "   $(grep -c . "$WORK/secrets") secrets checked against $(cat "$WORK/refresh.log" | wc -l) log lines"
# the files are all there after a remount with the tester's own keys
fg_umount "$WORK/m2"
stop_srv
mw_mount "$WORK/m3"
for j in $(seq 1 $i); do cmp "$WORK/src.$j" "$WORK/m3/f$j"; done
mw_umount "$WORK/m3"
mw_fsck
echo "PASS"
