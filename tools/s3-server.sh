#!/bin/bash
# s3-server.sh start|stop|status - a local S3 server (Ceph RGW) for tests and benchmarks.
#
#   start   start a throwaway one-monitor, one-OSD Ceph cluster with the RADOS Gateway on
#           127.0.0.1 (first run bootstraps CEPH_DIR, later runs restart it with data kept),
#           wait until it answers, create the bucket, and print on stdout:
#             export S3_ENDPOINT=... S3_BUCKET=... S3_REGION=... AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=... \
#                    S3_ENDPOINT_TLS=https://127.0.0.1:TLSPORT S3_CA_FILE=CEPH_DIR/tls/ca.pem
#           so that   eval "$(tools/s3-server.sh start)"   configures the s3 test suite.
#           The two TLS variables are printed only when https answers and verifies with that CA.
#           STS: RGW's STS is enabled (rgw_sts_key, rgw_s3_auth_use_sts) and a role S3_ROLE
#           (memwalfs-test, s3:* on every bucket) that the tester may assume is created;
#           S3_ROLE_ARN=arn:aws:iam:::role/S3_ROLE is printed when AssumeRole of it works.
#           If something already answers on the port, it is reused (nothing is started).
#           TLS: on every start of the daemons a throwaway CA and a server certificate for
#           127.0.0.1, localhost, s3.localhost and *.s3.localhost are made in CEPH_DIR/tls (once)
#           and the beast frontend is configured to serve https on TLSPORT as well; a running
#           instance started before this existed gets https at its next restart.
#           Virtual-hosted addressing: rgw_dns_name is s3.localhost, so
#           http://BUCKET.s3.localhost:RGWPORT/ works (curl resolves *.localhost to loopback).
#   stop [--remove-state]
#           stop the daemons that `start` started (pid files), waiting for each to exit.
#           A server this script did not start is left running.  --remove-state: then
#           remove CEPH_DIR too (the bucket's objects, the OSD's block file: 1-5 GB after a
#           test run), only if this script bootstrapped it (CEPH_DIR/.bootstrapped) and
#           stopped its daemons now.
#   status  say whether the server answers (exit 0) or not (exit 1).
#
# Everything but the export line goes to stderr.
# Environment: CEPH_DIR (state, default /tmp/memwalfs-rgw), RGWPORT (7480), TLSPORT (https,
# RGWPORT+963: 8443 for 7480), MONPORT (40100), S3_BUCKET (memwalfs-test), S3_REGION (us-east-1),
# S3_ACCESS_KEY (AKIATESTKEY0000), S3_SECRET_KEY (testsecret0123456789), BLOCK_BYTES (OSD file
# size, 20 GiB sparse).
# Needs the Debian packages radosgw ceph-mon ceph-osd curl openssl (tools/setup.sh installs them).
# RGW 16.2 is used because it checks SigV4 signatures and payload hashes and implements
# PUT with If-None-Match: * atomically (see docs/STORES.md).
set -euo pipefail

D=${CEPH_DIR:-/tmp/memwalfs-rgw}
MONPORT=${MONPORT:-40100}
RGWPORT=${RGWPORT:-7480}
AK=${S3_ACCESS_KEY:-AKIATESTKEY0000}
SK=${S3_SECRET_KEY:-testsecret0123456789}
BUCKET=${S3_BUCKET:-memwalfs-test}
REGION=${S3_REGION:-us-east-1}
ENDPOINT="http://127.0.0.1:$RGWPORT"
TLSPORT=${TLSPORT:-$((RGWPORT + 963))} # 8443 for the default 7480
ENDPOINT_TLS="https://127.0.0.1:$TLSPORT"
TLSDIR="$D/tls"
CA="$TLSDIR/ca.pem"
MARK="$D/started-by-memwalfs"   # present while daemons started by this script run
EMPTY_SHA=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
C="-c $D/ceph.conf"

say() { echo "s3-server: $*" >&2; }

answers() { curl -s -o /dev/null --max-time 2 "$ENDPOINT/"; }
tls_answers() { [ -s "$CA" ] && curl -s -o /dev/null --max-time 2 --cacert "$CA" "$ENDPOINT_TLS/"; }

# A throwaway CA and a server certificate signed by it, made once per state directory.
# The CA key stays in TLSDIR (tests only: nothing here is a secret worth keeping).
make_certs() {
	[ -s "$CA" ] && [ -s "$TLSDIR/server.pem" ] && [ -s "$TLSDIR/server.key" ] && return 0
	command -v openssl >/dev/null || {
		say "openssl is missing: serving plain http only"
		return 1
	}
	mkdir -p "$TLSDIR"
	(
		set -e
		cd "$TLSDIR"
		openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 3650 \
			-subj "/CN=memwalfs throwaway test CA" \
			-addext "basicConstraints=critical,CA:TRUE" \
			-addext "keyUsage=critical,keyCertSign,cRLSign"
		openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr \
			-subj "/CN=127.0.0.1"
		printf '%s\n' "basicConstraints=CA:FALSE" \
			"keyUsage=critical,digitalSignature,keyEncipherment" \
			"extendedKeyUsage=serverAuth" \
			"subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:s3.localhost,DNS:*.s3.localhost" \
			>server.ext
		openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
			-out server.pem -days 825 -extfile server.ext
		rm -f server.csr
	) >"$D/log/tls-gen.out" 2>&1 || {
		say "making the TLS certificates failed (see $D/log/tls-gen.out): plain http only"
		rm -f "$CA"
		return 1
	}
	say "made a throwaway CA ($CA) and a server certificate for 127.0.0.1/localhost/s3.localhost"
}

# Point the beast frontend line of ceph.conf at http and, when certificates exist, https.
# Takes effect when radosgw (re)starts.
frontend_conf() {
	local fe="beast endpoint=127.0.0.1:$RGWPORT"
	if (exec 3<>"/dev/tcp/127.0.0.1/$TLSPORT") 2>/dev/null; then
		# radosgw would fail to start if it could not bind every endpoint
		say "port $TLSPORT is taken: serving plain http only (set TLSPORT)"
	elif make_certs; then
		fe="$fe ssl_endpoint=127.0.0.1:$TLSPORT ssl_certificate=$TLSDIR/server.pem"
		fe="$fe ssl_private_key=$TLSDIR/server.key"
	fi
	fe="$fe tcp_nodelay=1"
	sed -i "s|^rgw_frontends = .*|rgw_frontends = $fe|" "$D/ceph.conf"
}

bootstrap() {
	rm -rf "$D"
	mkdir -p "$D"/{mon.a,osd.0,run,log,rgw,crash}
	local fsid osduuid
	fsid=$(cat /proc/sys/kernel/random/uuid)
	cat >"$D/ceph.conf" <<CONF
[global]
fsid = $fsid
mon_host = [v2:127.0.0.1:$MONPORT,v1:127.0.0.1:$((MONPORT + 1))]
public_addr = 127.0.0.1
ms_bind_ipv6 = false
keyring = $D/keyring
run_dir = $D/run
admin_socket = $D/run/\$name.asok
log_file = $D/log/\$name.log
pid_file = $D/run/\$name.pid
crash_dir = $D/crash
osd_pool_default_size = 1
osd_pool_default_min_size = 1
mon_allow_pool_size_one = true
osd_pool_default_pg_num = 8
osd_pool_default_pgp_num = 8
mon_max_pg_per_osd = 1000
osd_crush_chooseleaf_type = 0
mon_warn_on_pool_no_redundancy = false
mon_data_avail_warn = 1
mon_data_avail_crit = 0
auth_allow_insecure_global_id_reclaim = false
[mon]
mon_data = $D/mon.\$id
[osd]
osd_data = $D/osd.\$id
osd_objectstore = bluestore
bluestore_block_path = $D/osd.\$id/block.file
bluestore_block_create = true
bluestore_block_size = ${BLOCK_BYTES:-21474836480}
osd_memory_target = 1073741824
[client.rgw.a]
# tcp_nodelay: without it every small GET stalls ~40 ms (Nagle + delayed ACK)
rgw_frontends = beast endpoint=127.0.0.1:$RGWPORT tcp_nodelay=1
rgw_dns_name = s3.localhost
rgw_data = $D/rgw
CONF
	ceph-authtool --create-keyring "$D/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
	ceph-authtool "$D/keyring" --gen-key -n client.admin --cap mon 'allow *' --cap osd 'allow *' \
		--cap mgr 'allow *' >/dev/null
	ceph-authtool "$D/keyring" --gen-key -n osd.0 --cap mon 'allow profile osd' --cap osd 'allow *' \
		--cap mgr 'allow profile osd' >/dev/null
	ceph-authtool "$D/keyring" --gen-key -n client.rgw.a --cap mon 'allow rw' --cap osd 'allow rwx' >/dev/null
	monmaptool --create --fsid "$fsid" --addv a \
		"[v2:127.0.0.1:$MONPORT,v1:127.0.0.1:$((MONPORT + 1))]" "$D/monmap" >/dev/null
	ceph-mon $C --mkfs -i a --monmap "$D/monmap" --keyring "$D/keyring" >&2
	ceph-mon $C -i a >&2
	osduuid=$(cat /proc/sys/kernel/random/uuid)
	ceph $C osd new "$osduuid" 0 >/dev/null
	ceph-osd $C -i 0 --mkfs --osd-uuid "$osduuid" >"$D/log/osd-mkfs.out" 2>&1
}

wait_answer() {
	for _ in $(seq 1 1200); do
		answers && return 0
		sleep 0.1
	done
	say "RGW did not answer on $ENDPOINT within 120 s; see $D/log/"
	return 1
}

# RGW frees the space of deleted objects only in its own GC, by default two hours after the
# delete: a day of tests and benchmarks fills the 20 GiB OSD (POOL_FULL, then every PUT hangs).
# Deleted objects are reclaimed within a minute or two instead.  Added to ceph.conf of a state
# directory made before this existed; takes effect when radosgw (re)starts.
gc_conf() {
	grep -q '^rgw_gc_obj_min_wait' "$D/ceph.conf" || cat >>"$D/ceph.conf" <<'GC'
rgw_gc_obj_min_wait = 30
rgw_gc_processor_period = 30
rgw_gc_processor_max_time = 30
GC
}

# STS (AssumeRole, AssumeRoleWithWebIdentity) for the credential tests: RGW needs a 16-character
# rgw_sts_key (with the default one AssumeRole answers 400) and rgw_s3_auth_use_sts (without it S3
# rejects the temporary credentials).  Added to ceph.conf of a state directory made before this
# existed; takes effect when radosgw (re)starts.
sts_conf() {
	grep -q '^rgw_sts_key' "$D/ceph.conf" ||
		echo "rgw_sts_key = memwalfsteststs16" >>"$D/ceph.conf" # [client.rgw.a] is last
	grep -q '^rgw_s3_auth_use_sts' "$D/ceph.conf" ||
		echo "rgw_s3_auth_use_sts = true" >>"$D/ceph.conf"
}

# The role the tests assume (created once; its policies are set on every start of the daemons).
ROLE=${S3_ROLE:-memwalfs-test}
ROLE_ARN="arn:aws:iam:::role/$ROLE"
make_role() {
	local trust perm
	trust='{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":["arn:aws:iam:::user/tester"]},"Action":["sts:AssumeRole"]}]}'
	perm='{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["s3:*"],"Resource":["arn:aws:s3:::*"]}]}'
	radosgw-admin $C role get --role-name="$ROLE" >/dev/null 2>&1 ||
		radosgw-admin $C role create --role-name="$ROLE" --assume-role-policy-doc="$trust" \
			>"$D/log/role-create.out" 2>&1 || say "creating role $ROLE failed (see $D/log/role-create.out)"
	radosgw-admin $C role-policy put --role-name="$ROLE" --policy-name=s3all --policy-doc="$perm" \
		>"$D/log/role-policy.out" 2>&1 || say "setting the policy of role $ROLE failed"
}

# Does AssumeRole of $ROLE work with the tester's keys?  (Decides whether S3_ROLE_ARN is printed.)
sts_answers() {
	local body="Action=AssumeRole&Version=2011-06-15&RoleArn=$ROLE_ARN&RoleSessionName=probe&DurationSeconds=900"
	local sha
	sha=$(printf '%s' "$body" | sha256sum | cut -d' ' -f1)
	curl -s --max-time 10 --aws-sigv4 "aws:amz:$REGION:sts" --user "$AK:$SK" \
		-H "x-amz-content-sha256: $sha" -H "Content-Type: application/x-www-form-urlencoded" \
		--data "$body" "$ENDPOINT/" 2>/dev/null | grep -q '<SessionToken>'
}

# Signed PUT of the bucket (curl's --aws-sigv4 does not send x-amz-content-sha256 itself).
make_bucket() {
	local code
	code=$(curl -s -o "$D/log/bucket-create.out" -w '%{http_code}' --max-time 30 \
		--aws-sigv4 "aws:amz:$REGION:s3" --user "$AK:$SK" \
		-H "x-amz-content-sha256: $EMPTY_SHA" -X PUT "$ENDPOINT/$BUCKET") || true
	case "$code" in
	200 | 409) return 0 ;; # 409 BucketAlreadyOwnedByYou on some servers
	*)
		say "creating bucket $BUCKET failed: HTTP $code ($(head -c 300 "$D/log/bucket-create.out" 2>/dev/null))"
		return 1
		;;
	esac
}

start() {
	if answers; then
		say "an S3 server already answers on $ENDPOINT; reusing it"
	else
		for b in ceph-mon ceph-osd radosgw radosgw-admin ceph-authtool monmaptool curl; do
			command -v "$b" >/dev/null || {
				say "$b is missing: run tools/setup.sh (Debian: radosgw ceph-mon ceph-osd)"
				exit 1
			}
		done
		local new=0
		if [ ! -f "$D/.bootstrapped" ]; then
			say "bootstrapping a Ceph RGW in $D (first start, ~20 s)"
			bootstrap
			new=1
		else
			say "restarting the Ceph RGW in $D"
			ceph-mon $C -i a >&2
		fi
		touch "$MARK"
		frontend_conf
		sts_conf
		gc_conf
		ceph-osd $C -i 0 2>>"$D/log/osd-start.err" >&2
		radosgw $C -n client.rgw.a >&2
		wait_answer
		if [ $new = 1 ]; then
			radosgw-admin $C user create --uid=tester --display-name=tester \
				--access-key="$AK" --secret-key="$SK" >/dev/null
			touch "$D/.bootstrapped"
		fi
		make_role
	fi
	# A fresh RGW may refuse the first requests while its pools are created: retry.
	local ok=0
	for _ in $(seq 1 30); do
		if make_bucket; then ok=1; break; fi
		sleep 1
	done
	[ $ok = 1 ] || exit 1
	local tls=""
	for _ in $(seq 1 20); do
		if tls_answers; then
			tls=" S3_ENDPOINT_TLS=$ENDPOINT_TLS S3_CA_FILE=$CA"
			break
		fi
		grep -q "ssl_endpoint=127.0.0.1:$TLSPORT" "$D/ceph.conf" 2>/dev/null || break
		sleep 0.2
	done
	local sts=""
	if sts_answers; then
		sts=" S3_ROLE_ARN=$ROLE_ARN"
	else
		say "STS AssumeRole of $ROLE_ARN does not work here: the STS credential tests will SKIP"
	fi
	if [ -n "$tls" ]; then
		say "ready: $ENDPOINT and $ENDPOINT_TLS (CA $CA), bucket $BUCKET"
	else
		say "ready: $ENDPOINT bucket $BUCKET (no https: the TLS tests will SKIP)"
	fi
	echo "export S3_ENDPOINT=$ENDPOINT S3_BUCKET=$BUCKET S3_REGION=$REGION AWS_ACCESS_KEY_ID=$AK AWS_SECRET_ACCESS_KEY=$SK$tls$sts"
}

stop() {
	if [ ! -f "$MARK" ]; then
		say "no server started by this script in $D; nothing to stop"
		[ "${1:-}" = --remove-state ] && say "its state (if any) is left as it is"
		return 0
	fi
	for n in client.rgw.a osd.0 mon.a; do
		local f="$D/run/$n.pid" p
		[ -f "$f" ] || continue
		p=$(cat "$f")
		if kill "$p" 2>/dev/null; then
			for _ in $(seq 1 150); do
				kill -0 "$p" 2>/dev/null || break
				sleep 0.2
			done
			kill -0 "$p" 2>/dev/null && say "$n (pid $p) did not exit in 30 s"
		fi
	done
	rm -f "$MARK"
	say "stopped"
	if [ "${1:-}" = --remove-state ]; then
		if [ -f "$D/.bootstrapped" ] && [ "$D" != / ]; then
			say "removing its state in $D ($(du -sh "$D" 2>/dev/null | cut -f1))"
			rm -rf "$D"
		else
			say "$D was not made by this script: left as it is"
		fi
	else
		say "its state stays in $D ($(du -sh "$D" 2>/dev/null | cut -f1)): tools/s3-server.sh stop --remove-state, or rm -rf $D, when done"
	fi
}

case "${1:-}" in
start) start ;;
stop) stop "${2:-}" ;;
status)
	if answers; then
		say "answering on $ENDPOINT$([ -f "$MARK" ] && echo ' (started by this script)')"
	else
		say "not answering on $ENDPOINT"
		exit 1
	fi
	;;
*)
	echo "usage: $0 start|stop [--remove-state]|status" >&2
	exit 2
	;;
esac
