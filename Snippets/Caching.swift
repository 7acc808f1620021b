// The HTTP cache: fresh answers from memory, stale ones revalidated, secrets kept apart.
// Runs against the embedded demo server: `swift run --enable-all-traits Caching`.

// snippet.hide
import CatenaDemoServer
import Foundation

let server = try await DemoServer.start()
let environment = ServerEnvironment(scheme: "http", host: "127.0.0.1", port: server.port)
// snippet.show
import Catena
import CatenaAsyncHTTPClient

// snippet.chain
let cache = CacheMiddleware(maximumBytes: 20 << 20)  // least recently used entries go first
let chain =
    EnvironmentMiddleware(environment)  // the cache keys on the whole URL, so after this
    --> cache
    --> RetryMiddleware()  // a retried call is stored once
    --> AsyncHTTPClientTransport()
// snippet.end

// snippet.fresh
// The demo route answers with `Cache-Control: max-age=60` and an ETag.
let fresh = try APIRequest(.get, path: ["api", "cache", "profile"], query: [URLQueryItem(name: "max_age", value: "60")])
_ = try await chain.load(fresh)  // a miss: from the server, stored
_ = try await chain.load(fresh)  // a hit: from memory, no request
print(cache.statistics.hits, cache.statistics.misses)  // 1 1
// snippet.end

// snippet.revalidate
// `no-cache`: stored, but asked about each time with If-None-Match; a 304 answers
// with the stored body.
let checked = try APIRequest(.get, path: ["api", "cache", "feed"], query: [URLQueryItem(name: "no_cache", value: "1")])
_ = try await chain.load(checked)
let again = try await chain.load(checked)
print(again.status, cache.statistics.revalidated)  // 200 OK 1
// snippet.end

// snippet.disk
// In a directory, the entries outlive the process: a second cache on it (the next run
// of a program) answers without the network. Offline, whatever an entry's age.
let directory = FileManager.default.temporaryDirectory.appending(path: "catena-snippet-\(UUID().uuidString)")
let firstRun = EnvironmentMiddleware(environment) --> CacheMiddleware(directory: directory) --> AsyncHTTPClientTransport()
_ = try await firstRun.load(fresh)
let nextRun = CacheMiddleware(directory: directory)
var offline = fresh
offline[option: CacheOffline.self] = true
let remembered = try await (EnvironmentMiddleware(environment) --> nextRun --> AsyncHTTPClientTransport()).load(offline)
print(remembered.status, nextRun.statistics.hits)  // 200 OK 1
// snippet.end

// snippet.hide
try? FileManager.default.removeItem(at: directory)
await server.stop()
