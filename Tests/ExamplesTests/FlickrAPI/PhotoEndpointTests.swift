import Catena
import CatenaAsyncHTTPClient
import CatenaDemoServer
import FlickrAPI
import Testing
@testable import CatenaTestSupport

@Suite("FlickrAPI: GetRecentEndpoint, GetSizesEndpoint")
struct PhotoEndpointTests {
    @Test("getRecent pages through the photos in Flickr's shape")
    func recent() async throws {
        let recent = try await demoClient().send(GetRecentEndpoint(perPage: 100, page: 2))
        #expect(recent.photos.page == 2)
        #expect(recent.photos.perpage == 100)
        #expect(recent.photos.total == 1000)
        #expect(recent.photos.pages == 10)
        #expect(recent.photos.photo.count == 100)
        let request = try GetRecentEndpoint().buildRequest()
        #expect(request.percentEncodedPath == "/services/rest/")
        #expect(request.percentEncodedQuery == "method=flickr.photos.getRecent&per_page=100&page=1&format=json&nojsoncallback=1")
    }

    @Test("getSizes lists sizes; the largest gives the photo's URL")
    func sizes() async throws {
        let client = try await demoClient()
        let photo = try #require(try await client.send(GetRecentEndpoint(perPage: 1)).photos.photo.first)
        let sizes = try await client.send(GetSizesEndpoint(photoID: photo.id))
        #expect(sizes.sizes.size.map(\.label) == ["Square", "Small", "Medium", "Large"])
        #expect(sizes.largest?.source == photo.imageURL(suffix: "b"))
    }

    @Test("Flickr's stat fail inside a 200 is an apiFailure carrying the Flickr error")
    func statFail() async throws {
        let error = await #expect(throws: CatenaError.self) { try await demoClient().send(GetSizesEndpoint(photoID: "nope")) }
        #expect(error?.code == .apiFailure)
        #expect(error?.response?.status == .ok)
        #expect(error?.apiError(as: FlickrError.self)?.code == 1)
        #expect(error?.detail?.contains("Flickr error 1: Photo \"nope\" not found") == true)
    }

    @Test("bad input names the field")
    func badInput() async throws {
        let error = await #expect(throws: CatenaError.self) { try await demoClient().send(GetRecentEndpoint(perPage: 0)) }
        #expect(error?.detail == "GetRecentEndpoint: perPage must be 1...500, not 0")
    }

    @Test("the server's failure rate is seeded: the same seed fails the same calls")
    func seededFailures() async throws {
        func pattern(seed: UInt64) async throws -> [Bool] {
            let server = try await DemoServer.start(photos: PhotoSettings(failureRate: 0.5, seed: seed))
            let client = Client(EnvironmentMiddleware(ServerEnvironment(baseURL: server.baseURL)!) --> AsyncHTTPClientTransport.forTests())
            let photos = try await client.send(GetRecentEndpoint(perPage: 20)).photos.photo
            let results = try await client.sendAll(photos.map { GetSizesEndpoint(photoID: $0.id) }, maxConcurrent: 4)
            await server.stop()
            return results.map { if case .failure(let error) = $0 { error.response?.status.code == 503 } else { false } }
        }
        let first = try await pattern(seed: 7)
        #expect(try await pattern(seed: 7) == first)
        #expect(first.contains(true) && first.contains(false), "about half fail: \(first)")
    }
}
