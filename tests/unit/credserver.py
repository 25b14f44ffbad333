#!/usr/bin/env python3
"""credserver.py PORTFILE LOGFILE [--lifetime SEC] [--token TOKEN] [--mint] [--secrets FILE]

A small local server for the credential-chain tests that follows the documented protocols of
  - the container credentials endpoint (ECS/EKS): GET /container/creds, with the Authorization
    header equal to TOKEN when --token is given (else 401); answers
    {"AccessKeyId", "SecretAccessKey", "Token", "Expiration", "RoleArn"}
  - EC2 instance metadata, IMDSv2: PUT /latest/api/token with
    X-aws-ec2-metadata-token-ttl-seconds (1..21600) gives a session token; every GET under
    /latest/ must carry it in X-aws-ec2-metadata-token, else 401 (IMDSv1 is refused);
    GET /latest/meta-data/iam/security-credentials/ names the role, .../ROLE gives
    {"Code": "Success", "Type": "AWS-HMAC", "AccessKeyId", "SecretAccessKey", "Token",
    "Expiration", "LastUpdated"}
Credentials expire LIFETIME seconds after they are handed out (default 3600).  With --mint they
are real temporary credentials of the S3 test server: a SigV4-signed STS AssumeRole of
S3_ROLE_ARN at S3_ENDPOINT with AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (read once at start);
without it they are made-up keys ASIAFAKE<n>.  Each request is logged to LOGFILE as
"METHOD PATH STATUS", each hand-out as "ISSUED ACCESSKEYID"; secrets are never logged (with
--secrets, the secret key and token of each hand-out go to FILE, for a test to grep for).
The port (127.0.0.1, chosen by the kernel) is written to PORTFILE once listening.
"""
import datetime, hashlib, hmac, http.server, json, os, re, secrets, sys, threading
import urllib.parse, urllib.request

args = sys.argv[1:]
portfile, logfile = args[0], args[1]
lifetime = int(args[args.index('--lifetime') + 1]) if '--lifetime' in args else 3600
auth_token = args[args.index('--token') + 1] if '--token' in args else None
mint = '--mint' in args
secrets_file = args[args.index('--secrets') + 1] if '--secrets' in args else None
ROLE = 'memwalfs-test-role'
lock = threading.Lock()
imds_tokens = set()
issued = [0]
env = dict(os.environ)


def log(line):
    with lock:
        with open(logfile, 'a') as f:
            f.write(line + '\n')


def iso(t):
    return t.strftime('%Y-%m-%dT%H:%M:%SZ')


def sign(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def assume_role():
    """STS AssumeRole at the S3 test server, SigV4 with service sts (the keys it hands back)."""
    ep = env['S3_ENDPOINT'].rstrip('/')
    region = env.get('S3_REGION', 'us-east-1')
    body = urllib.parse.urlencode({'Action': 'AssumeRole', 'Version': '2011-06-15',
                                   'RoleArn': env['S3_ROLE_ARN'], 'RoleSessionName': 'credserver',
                                   'DurationSeconds': '900'})
    now = datetime.datetime.now(datetime.timezone.utc)
    amz, day = now.strftime('%Y%m%dT%H%M%SZ'), now.strftime('%Y%m%d')
    host = urllib.parse.urlparse(ep).netloc
    phash = hashlib.sha256(body.encode()).hexdigest()
    ctype = 'application/x-www-form-urlencoded'
    canon = (f'POST\n/\n\ncontent-type:{ctype}\nhost:{host}\nx-amz-content-sha256:{phash}\n'
             f'x-amz-date:{amz}\n\ncontent-type;host;x-amz-content-sha256;x-amz-date\n{phash}')
    scope = f'{day}/{region}/sts/aws4_request'
    sts = f'AWS4-HMAC-SHA256\n{amz}\n{scope}\n' + hashlib.sha256(canon.encode()).hexdigest()
    k = sign(('AWS4' + env['AWS_SECRET_ACCESS_KEY']).encode(), day)
    for part in (region, 'sts', 'aws4_request'):
        k = sign(k, part)
    sig = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
    auth = (f'AWS4-HMAC-SHA256 Credential={env["AWS_ACCESS_KEY_ID"]}/{scope},'
            f'SignedHeaders=content-type;host;x-amz-content-sha256;x-amz-date,Signature={sig}')
    rq = urllib.request.Request(ep + '/', data=body.encode(), method='POST', headers={
        'Content-Type': ctype, 'x-amz-date': amz, 'x-amz-content-sha256': phash,
        'Authorization': auth})
    doc = urllib.request.urlopen(rq, timeout=30).read().decode()
    get = lambda tag: re.search(f'<{tag}>([^<]*)</{tag}>', doc).group(1)
    return get('AccessKeyId'), get('SecretAccessKey'), get('SessionToken')


def credentials():
    with lock:
        issued[0] += 1
        n = issued[0]
    if mint:
        ak, sk, tok = assume_role()
    else:
        ak, sk, tok = f'ASIAFAKE{n:04d}', secrets.token_hex(20), secrets.token_hex(40)
    now = datetime.datetime.now(datetime.timezone.utc)
    log(f'ISSUED {ak}')
    if secrets_file:  # for tests that check the secrets appear nowhere else
        with lock:
            with open(secrets_file, 'a') as f:
                f.write(f'{sk}\n{tok}\n')
    return now, ak, sk, tok, now + datetime.timedelta(seconds=lifetime)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'

    def log_message(self, fmt, *a):
        pass

    def answer(self, status, body, ctype='application/json'):
        data = body.encode()
        self.send_response(status)
        self.send_header('Content-Type', ctype)
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        log(f'{self.command} {self.path} {status}')

    def do_PUT(self):
        n = int(self.headers.get('Content-Length') or 0)
        if n:
            self.rfile.read(n)
        if self.path != '/latest/api/token':
            return self.answer(404, 'not found', 'text/plain')
        ttl = self.headers.get('X-aws-ec2-metadata-token-ttl-seconds')
        if not ttl or not ttl.isdigit() or not 1 <= int(ttl) <= 21600:
            return self.answer(400, 'bad ttl', 'text/plain')
        t = secrets.token_urlsafe(32)
        with lock:
            imds_tokens.add(t)
        self.answer(200, t, 'text/plain')

    def do_GET(self):
        if self.path == '/container/creds':
            if auth_token is not None and self.headers.get('Authorization') != auth_token:
                return self.answer(401, '{"message": "unauthorized"}')
            now, ak, sk, tok, exp = credentials()
            return self.answer(200, json.dumps({
                'RoleArn': 'arn:aws:iam::123456789012:role/' + ROLE, 'AccessKeyId': ak,
                'SecretAccessKey': sk, 'Token': tok, 'Expiration': iso(exp)}))
        if self.path.startswith('/latest/'):
            with lock:
                ok = self.headers.get('X-aws-ec2-metadata-token') in imds_tokens
            if not ok:
                return self.answer(401, 'unauthorized', 'text/plain')
            base = '/latest/meta-data/iam/security-credentials/'
            if self.path == base:
                return self.answer(200, ROLE, 'text/plain')
            if self.path == base + ROLE:
                now, ak, sk, tok, exp = credentials()
                return self.answer(200, json.dumps({
                    'Code': 'Success', 'LastUpdated': iso(now), 'Type': 'AWS-HMAC',
                    'AccessKeyId': ak, 'SecretAccessKey': sk, 'Token': tok,
                    'Expiration': iso(exp)}, indent=2))
        self.answer(404, 'not found', 'text/plain')


srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
with open(portfile + '.tmp', 'w') as f:
    f.write(str(srv.server_address[1]))
os.rename(portfile + '.tmp', portfile)
srv.serve_forever()
