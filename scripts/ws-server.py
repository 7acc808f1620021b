#!/usr/bin/env python3
"""A WebSocket server the project did not write (Python's `websockets`, 13 or later),
for Catena's tests. Listens on 127.0.0.1:PORT (or a Unix socket), optionally over TLS
(and with --client-ca, requiring a client certificate).

Paths:
  /echo                 sends back every message
  /protected            401 with a Bearer challenge unless `Authorization: Bearer letmein`
  /chat                 subprotocols chat.v2 and chat.v1, chosen by the server's order
  /close?code=C&reason=R  closes with C and R after the first message
  /ticker?n=N&size=S    sends N text messages of S bytes, then closes with 1000
  /headers              sends the upgrade request's fields as one JSON message
  /flood                sends 64 KiB binary messages until the client closes
  /extensions           sends the extensions agreed, as one JSON message, then echoes
  /flaky?id=K           sends "hello N" (N: the connection to this K), closes with 1012
                        for N < 3, then echoes
"""
import argparse
import asyncio
import json
import os
import ssl
import sys
from http import HTTPStatus
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.server import serve, unix_serve


def query(connection):
    return {k: v[0] for k, v in parse_qs(urlsplit(connection.request.path).query).items()}


FLAKY = {}


def process_request(connection, request):
    path = urlsplit(request.path).path
    if path == "/protected" and request.headers.get("Authorization") != "Bearer letmein":
        response = connection.respond(HTTPStatus.UNAUTHORIZED, "sign in first\n")
        response.headers["WWW-Authenticate"] = 'Bearer realm="ws"'
        return response
    return None


async def handler(connection):
    path = urlsplit(connection.request.path).path
    if path in ("/echo", "/protected", "/chat"):
        async for message in connection:
            await connection.send(message)
    elif path == "/extensions":
        await connection.send(json.dumps([repr(e) for e in connection.protocol.extensions]))
        async for message in connection:
            await connection.send(message)
    elif path == "/close":
        args = query(connection)
        await connection.recv()
        await connection.close(int(args.get("code", "1000")), args.get("reason", ""))
    elif path == "/ticker":
        args = query(connection)
        size = int(args.get("size", "16"))
        for index in range(int(args.get("n", "10"))):
            await connection.send(str(index).rjust(size, "."))
        await connection.close(1000, "done")
    elif path == "/headers":
        await connection.send(json.dumps({k.lower(): v for k, v in connection.request.headers.raw_items()}))
        async for message in connection:
            pass
    elif path == "/flaky":
        key = query(connection).get("id", "")
        FLAKY[key] = FLAKY.get(key, 0) + 1
        number = FLAKY[key]
        await connection.send(f"hello {number}")
        if number < 3:
            await connection.close(1012, "restarting")
        else:
            async for message in connection:
                await connection.send(message)
    elif path == "/flood":
        chunk = bytes(64 * 1024)
        while True:
            await connection.send(chunk)
    else:
        await connection.close(1008, "no such path")


def select_subprotocol(connection, subprotocols):
    for name in ("chat.v2", "chat.v1"):
        if name in subprotocols:
            return name
    return None


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--unix")
    parser.add_argument("--cert")
    parser.add_argument("--key")
    parser.add_argument("--client-ca", help="require a client certificate issued by this CA (PEM)")
    args = parser.parse_args()
    context = None
    if args.cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.cert, args.key)
        if args.client_ca:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(args.client_ca)
    options = dict(
        process_request=process_request,
        select_subprotocol=select_subprotocol,
        ssl=context,
        max_size=8 * 1024 * 1024,
        ping_interval=None,
        # permessage-deflate when the client offers it, with websockets' defaults.
        compression="deflate",
    )
    if args.unix:
        server = await unix_serve(handler, args.unix, **options)
    else:
        server = await serve(handler, "127.0.0.1", args.port, **options)
    port = server.sockets[0].getsockname()
    print(f"listening {port}", flush=True)
    # A test process keeps its server for its whole run and never stops it: go when it
    # is gone (this process is then another's child), rather than outlive it.
    parent = os.getppid()

    async def watch_parent():
        while os.getppid() == parent:
            await asyncio.sleep(1)
        server.close()

    asyncio.get_running_loop().create_task(watch_parent())
    try:
        await server.serve_forever()
    except asyncio.CancelledError:
        pass


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
