#if DemoServer
import Catena
import Foundation
import Hummingbird
import NIOCore

/// How the demo server's Flickr-style photo routes behave.
public struct PhotoSettings: Sendable {
    /// Added to every photos call.
    public var latency: Duration
    /// The share of getSizes calls that fail with 503 (retryable), decided by `seed`,
    /// the photo and how many times it was asked for, so a run is reproducible.
    public var failureRate: Double
    public var seed: UInt64
    /// How many photos exist; getRecent pages through them.
    public var photoCount: Int

    public init(latency: Duration = .zero, failureRate: Double = 0, seed: UInt64 = 1, photoCount: Int = 1000) {
        self.latency = latency
        self.failureRate = min(max(failureRate, 0), 1)
        self.seed = seed
        self.photoCount = max(0, photoCount)
    }
}

/// `/services/rest/`: flickr.photos.getRecent and flickr.photos.getSizes in Flickr's
/// shapes, errors reported as `{"stat": "fail", ...}` with status 200 as Flickr does.
enum PhotoRoutes {
    typealias Context = DemoRoutes.Context

    static func add(to router: Router<Context>, settings: PhotoSettings) {
        let attempts = Locked<[String: Int]>([:])
        let handler: @Sendable (Request, Context) async throws -> Response = { request, _ in
            if settings.latency > .zero { try await Task.sleep(for: settings.latency) }
            let query = request.uri.queryParameters
            switch query.get("method") {
            case "flickr.photos.getRecent":
                let perPage = min(max(query.get("per_page", as: Int.self) ?? 100, 1), 500)
                let page = try wholeNumber(query.get("page"), named: "page", in: 1...1_000_000, default: 1)
                let start = (page - 1) * perPage
                let ids = start < settings.photoCount ? Array(start..<min(start + perPage, settings.photoCount)) : []
                let photos = ids.map { index in
                    #"{"id":"\#(photoID(index))","owner":"\#(index % 97)@N0\#(index % 7)","secret":"\#(secret(index, settings.seed))","server":"\#(65_000 + index % 500)","farm":66,"title":"Demo photo \#(index + 1)","ispublic":1,"isfriend":0,"isfamily":0}"#
                }
                let pages = (settings.photoCount + perPage - 1) / perPage
                // Recent photos change: a cache must ask each time (validators, no-cache).
                return CacheRoutes.cacheable(
                    request,
                    body: ByteBuffer(
                        string:
                            #"{"photos":{"page":\#(page),"pages":\#(pages),"perpage":\#(perPage),"total":\#(settings.photoCount),"photo":[\#(photos.joined(separator: ","))]},"stat":"ok"}"#
                    ))
            case "flickr.photos.getSizes":
                guard let id = query.get("photo_id"), let index = photoIndex(id), index < settings.photoCount else {
                    return fail(1, "Photo \"\(query.get("photo_id") ?? "")\" not found (invalid ID)")
                }
                let attempt = attempts.withLock { all -> Int in
                    all[id, default: 0] += 1
                    return all[id]!
                }
                if settings.failureRate > 0, unitValue(settings.seed, UInt64(index), UInt64(attempt)) < settings.failureRate {
                    return DemoRoutes.rawJSON(#"{"stat":"fail","code":105,"message":"Service currently unavailable"}"#, status: .serviceUnavailable)
                }
                let server = 65_000 + index % 500
                let base = "https://live.staticflickr.com/\(server)/\(id)_\(secret(index, settings.seed))"
                let sizes = [("Square", "sq", "s", 75, 75), ("Small", "s", "m", 240, 160), ("Medium", "m", "", 500, 333), ("Large", "l", "b", 1024, 683)]
                    .map { label, page, suffix, width, height in
                        #"{"label":"\#(label)","width":\#(width),"height":\#(height),"source":"\#(base)\#(suffix.isEmpty ? "" : "_" + suffix).jpg","url":"https://www.flickr.com/photos/\#(index % 97)@N0\#(index % 7)/\#(id)/sizes/\#(page)/","media":"photo"}"#
                    }
                // A photo's sizes do not change: a cache may keep them for an hour.
                return CacheRoutes.cacheable(
                    request,
                    body: ByteBuffer(
                        string:
                            #"{"sizes":{"canblog":0,"canprint":0,"candownload":1,"size":[\#(sizes.joined(separator: ","))]},"stat":"ok"}"#),
                    cacheControl: "public, max-age=3600")
            default:
                return fail(112, "Method \"\(query.get("method") ?? "")\" not found")
            }
        }
        router.get("services/rest", use: handler)
    }

    static func fail(_ code: Int, _ message: String) -> Response {
        DemoRoutes.rawJSON(#"{"stat":"fail","code":\#(code),"message":"\#(message.replacingOccurrences(of: "\"", with: "\\\""))"}"#, status: .ok)
    }

    static func photoID(_ index: Int) -> String { String(52_000_000_000 + index) }

    static func photoIndex(_ id: String) -> Int? {
        guard let value = Int(id), value >= 52_000_000_000 else { return nil }
        return value - 52_000_000_000
    }

    static func secret(_ index: Int, _ seed: UInt64) -> String {
        String(mix(seed, UInt64(index), 0) & 0xff_ffff_ffff, radix: 16)
    }

    /// SplitMix64 over the inputs: a reproducible value per (seed, photo, attempt).
    static func mix(_ a: UInt64, _ b: UInt64, _ c: UInt64) -> UInt64 {
        var z = a &+ b &* 0x9E37_79B9_7F4A_7C15 &+ c &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    static func unitValue(_ a: UInt64, _ b: UInt64, _ c: UInt64) -> Double {
        Double(mix(a, b, c) >> 11) / Double(1 << 53)
    }
}
#endif  // DemoServer
