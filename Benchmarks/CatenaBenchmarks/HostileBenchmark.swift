import Catena
import CatenaAsyncHTTPClient
import CatenaDemoServer
import Foundation

/// Hostile servers, each transport alone in turn: one gzip body of 2 MiB that inflates
/// to 2 GiB, then 50 hostile calls at once (10 each of that bomb, a server that never
/// answers, a head then a trickle, a truncated body, a reset), every call with a 3 s
/// timeout and the default 64 MiB limit. Prints the slowest call's time (it must stay
/// within the timeout + 1 s), the outcomes, and the peak resident memory over the
/// row's start (sampled every 20 ms, server included).
func hostileBenchmark() async throws {
    let server = try await MisbehavingServer.start()
    let mix: [MisbehavingServer.Fault] = [.hugeGzipBomb, .silence, .slowBody, .truncated, .reset]
    let rows: [(String, [MisbehavingServer.Fault])] = [
        ("one 2 GiB gzip bomb (2 MiB sent)", [.hugeGzipBomb]),
        ("50 hostile calls at once", Array(repeating: mix, count: 10).flatMap { $0 }),
    ]
    print("## Hostile servers (`--only hostile`)")
    print()
    print("| transport | workload, 3 s timeout each | slowest call, s | outcomes | peak resident growth, MB |")
    print("|---|---|---:|---|---:|")
    for name in ["AsyncHTTPClient", "URLSession"] {
        for (label, faults) in rows {
            let transport: any HTTPLoader =
                name == "AsyncHTTPClient" ? AsyncHTTPClientTransport(timeout: .seconds(30)) : URLSessionTransport(timeout: .seconds(30))
            let baseline = residentBytes()
            let (results, peak) = await peakResident {
                await withTaskGroup(of: (Duration, String).self) { group in
                    for fault in faults {
                        group.addTask {
                            var request = APIRequest(.get, url: server.url(fault))
                            request[option: RequestTimeout.self] = .seconds(3)
                            let start = ContinuousClock.now
                            let outcome: String
                            do {
                                outcome = "\(try await transport.load(request).status.code)"
                            } catch {
                                outcome = (error as? CatenaError).map { "\($0.code)" } ?? "\(type(of: error))"
                            }
                            return (ContinuousClock.now - start, outcome)
                        }
                    }
                    var all: [(Duration, String)] = []
                    for await result in group { all.append(result) }
                    return all
                }
            }
            let slowest = results.map { $0.0 }.max() ?? .zero
            let outcomes = Dictionary(grouping: results.map { $0.1 }, by: { $0 }).map { "\($0.value.count) \($0.key)" }.sorted().joined(separator: ", ")
            print("| \(name) | \(label) | \(format(slowest.seconds, 2)) | \(outcomes) | \(format(Double(peak - baseline) / 1e6, 0)) |")
            // corelibs goes on inflating a bomb after its call ended: let it finish
            // before the next row measures.
            try await Task.sleep(for: .seconds(name == "URLSession" ? 20 : 2))
        }
    }
    print()
    await server.stop()
}
