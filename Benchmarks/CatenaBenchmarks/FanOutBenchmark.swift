// The photos fan-out and the cancellation latency, beside the raw calls they compare with.

import AsyncHTTPClient
import Catena
import CatenaAsyncHTTPClient
import CatenaDemoServer
import FlickrAPI
import Foundation
import NIOCore
import NIOFoundationCompat
import NIOPosix

enum BenchmarkError: Error {
    case status(Int)
}

/// The photos fan-out (TWGOperations' Flickr example): getRecent, then 100 getSizes, 8 at a time, against a server that
/// adds 20 ms to every call; wall time against the ideal ceil(100/8) × 20 ms + 20 ms, and against the same calls made
/// with raw AsyncHTTPClient (`execute` + `collect` + JSON decoding, 8 at a time in a task group), in alternating
/// order round by round: what the server's sleeps and the machine add over the ideal, the raw run pays too.
func photosFanOut(rounds: Int) async throws {
    let latency = Duration.milliseconds(20)
    let server = try await DemoServer.start(photos: PhotoSettings(latency: latency), logLevel: .error)
    let client = Client(EnvironmentMiddleware(ServerEnvironment(baseURL: server.baseURL)!) --> AsyncHTTPClientTransport())
    // The raw calls move the same bytes: Catena's client configuration (gzip decoded) and
    // the Accept-Encoding Catena sends with it.
    let rawClient = HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: AsyncHTTPClientTransport.defaultConfiguration)
    let ideal = latency * ((100 + 7) / 8) + latency
    func catena() async throws {
        let photos = try await client.send(GetRecentEndpoint(perPage: 100)).photos.photo
        let sizes = try await client.sendAllOrFail(photos.map { GetSizesEndpoint(photoID: $0.id) }, maxConcurrent: 8)
        guard sizes.count == 100 else { throw BenchmarkError.status(sizes.count) }
    }
    func rawURL(_ items: [String: String]) -> String {
        let query = (["format": "json", "nojsoncallback": "1"].merging(items) { $1 }).map { URLQueryItem(name: $0, value: $1) }
        return server.baseURL.appending(path: "services/rest/").appending(queryItems: query).absoluteString
    }
    func raw() async throws {
        let recent = try await rawGet(rawURL(["method": "flickr.photos.getRecent", "per_page": "100", "page": "1"]), on: rawClient, as: RecentPhotos.self)
        let urls = recent.photos.photo.map { rawURL(["method": "flickr.photos.getSizes", "photo_id": $0.id]) }
        let count = try await withThrowingTaskGroup(of: PhotoSizes.self) { group in
            var next = 0
            var done = 0
            while next < min(8, urls.count) {
                let url = urls[next]
                group.addTask { try await rawGet(url, on: rawClient, as: PhotoSizes.self) }
                next += 1
            }
            while try await group.next() != nil {
                done += 1
                if next < urls.count {
                    let url = urls[next]
                    group.addTask { try await rawGet(url, on: rawClient, as: PhotoSizes.self) }
                    next += 1
                }
            }
            return done
        }
        guard count == 100 else { throw BenchmarkError.status(count) }
    }
    var walls: [Double] = [], rawWalls: [Double] = []
    for round in 0..<(rounds + 1) {
        // Alternating order: whichever goes first in a round does not always get the quieter machine.
        for catenaFirst in round.isMultiple(of: 2) ? [true, false] : [false, true] {
            let start = ContinuousClock.now
            if catenaFirst { try await catena() } else { try await raw() }
            let wall = (ContinuousClock.now - start).milliseconds
            if round > 0 { catenaFirst ? walls.append(wall) : rawWalls.append(wall) }  // round 0: warm-up
        }
    }
    let wall = median(walls), rawWall = median(rawWalls)
    print()
    print("| fan-out (AsyncHTTPClient), median of \(walls.count) | wall ms | best | ideal ms | wall / ideal | raw wall ms | raw / ideal | Catena / raw wall |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    print(
        "| getRecent + 100 getSizes, 8 at a time, 20 ms latency | \(format(wall, 1)) | \(format(walls.min()!, 1)) | \(format(ideal.milliseconds, 0)) | **\(format(wall / ideal.milliseconds, 3)) ×** | \(format(rawWall, 1)) | \(format(rawWall / ideal.milliseconds, 3)) × | **\(format(wall / rawWall, 3)) ×** |"
    )
    try await rawClient.shutdown()
    await server.stop()
}

/// A GET of `url` with raw AsyncHTTPClient, asking for gzip as Catena does, its JSON decoded.
func rawGet<Content: Decodable>(_ url: String, on client: HTTPClient, as type: Content.Type) async throws -> Content {
    var request = HTTPClientRequest(url: url)
    request.headers.add(name: "Accept-Encoding", value: ContentCoding.acceptEncoding)
    let response = try await client.execute(request, timeout: .seconds(30))
    let body = try await response.body.collect(upTo: 1 << 20)
    guard response.status == .ok else { throw BenchmarkError.status(Int(response.status.code)) }
    return try JSONDecoder().decode(Content.self, from: body)
}

/// How long a transport takes to return `cancelled` after its task is cancelled
/// mid-flight (the server would answer only after 5 s). Goal: under 100 ms.
func cancellationLatency(base: URL, ahc: any HTTPLoader, urlSession: any HTTPLoader) async throws {
    print()
    print("| cancellation mid-flight (50 requests each) | p50 ms | p99 ms | max ms |")
    print("|---|---:|---:|---:|")
    for (name, transport) in [("AsyncHTTPClientTransport", ahc), ("URLSessionTransport", urlSession)] {
        var latencies: [Duration] = []
        for _ in 0..<50 {
            let request = try APIRequest(.get, baseURL: base, path: ["api", "users", "1"], query: [URLQueryItem(name: "delay", value: "5")])
            let task = Task { try await transport.load(request) }
            try await Task.sleep(for: .milliseconds(30))
            let cancelledAt = ContinuousClock.now
            task.cancel()
            guard case .failure(let error) = await task.result, (error as? CatenaError)?.code == .cancelled else {
                throw BenchmarkError.status(-2)
            }
            latencies.append(ContinuousClock.now - cancelledAt)
        }
        latencies.sort()
        print(
            "| \(name) | \(format(percentile(latencies, 0.5).milliseconds, 3)) | \(format(percentile(latencies, 0.99).milliseconds, 3)) | \(format(latencies.last!.milliseconds, 3)) |"
        )
    }
}
