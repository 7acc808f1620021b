import AsyncHTTPClient
import Catena
import CatenaAsyncHTTPClient
import Foundation
import InMemoryTracing
import Testing
import Tracing
@testable import CatenaTestSupport

@Suite("AsyncHTTPClient's own spans")
struct ClientTracingTests {
    @Test("a client that traces keeps its request span inside the caller's trace (such a client does not take the delegate path)")
    func clientSpanNests() async throws {
        let tracer = InMemoryTracer()
        var configuration = AsyncHTTPClientTransport.defaultConfiguration
        #expect(configuration.tracing.tracer == nil, "Catena's own configuration leaves the call's span to TracingMiddleware")
        configuration.tracing.tracer = tracer
        let base = try await TestServer.running().baseURL
        try await AsyncHTTPClientTransport.withTransport(configuration: configuration) { transport in
            try await tracer.withSpan("caller") { _ in
                _ = try await transport.load(APIRequest(.get, url: base.appendingPathComponent("api/users/2"))).validateStatus()
            }
        }
        let spans = tracer.finishedSpans
        let caller = try #require(spans.first { $0.operationName == "caller" })
        let clientSpans = spans.filter { $0.operationName != "caller" }
        #expect(!clientSpans.isEmpty, "the client made its span")
        for span in clientSpans {
            #expect(span.parentSpanID == caller.spanID, "\(span.operationName) is a child of the caller's span, not a trace of its own")
        }
    }
}
