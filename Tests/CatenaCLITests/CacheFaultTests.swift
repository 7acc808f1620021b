import Catena
import Foundation
import HTTPTypes
import Testing
@testable import CatenaTestSupport

/// `catena get --cache` when the directory fails it: a full disk, a read-only file
/// system, several runs storing one entry at once. The call's answer is the server's,
/// whole, and nothing traps; the directory holds whole entries or none.
@Suite(
    "catena get --cache when the disk fails it", .serialized,
    .enabled(if: !Timing.isThreadSanitized, "the command runs in child processes, as in RequestCommandTests"))
struct CacheFaultTests {
    static func url(_ key: String, _ query: String = "max_age=60&size=4096") async throws -> String {
        try await TestServer.running().baseURL.absoluteString + "/api/cache/\(key)?\(query)"
    }

    /// The server's full answers for `key` (or its 304s).
    static func fullAnswers(_ key: String, _ kind: String = "full") async throws -> Int {
        let stats = try await TransportKind.asyncHTTPClient.make().load(
            try APIRequest(.get, urlString: try await TestServer.running().baseURL.absoluteString + "/api/cache-stats/\(key)"))
        return (try JSONSerialization.jsonObject(with: stats.body) as? [String: Int])?[kind] ?? -1
    }

    static func files(_ directory: URL) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).sorted()
    }

    @Test("a full disk (a 1 KiB file-size limit): the answer is the server's, no entry or half-written file stays")
    func fullDisk() async throws {
        let directory = FileManager.default.temporaryDirectory.appending(path: "catena-full-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = UUID().uuidString
        let url = try await Self.url(key)
        // Ignored, SIGXFSZ stays ignored across exec: a write past the limit fails with EFBIG.
        // The limit binds the command alone; its output goes through a pipe to cat, unbound.
        let limited = ["/bin/bash", "-c", #"trap '' XFSZ; (ulimit -f 1; exec "$@") | cat; exit "${PIPESTATUS[0]}""#, "bash"]
        let first = try await CatenaCommandLine.run(["get", url, "--cache", directory.path], wrapper: limited)
        #expect(first.status == 0, "\(first.errors)")
        #expect(first.output.count > 4096 && first.text.contains(key), "the whole body")
        #expect(!Self.files(directory).contains { $0.hasSuffix(".entry") || $0.hasSuffix(".tmp") }, "\(Self.files(directory))")
        let second = try await CatenaCommandLine.run(["get", url, "--cache", directory.path], wrapper: limited)
        #expect(second.status == 0 && second.output == first.output)
        #expect(try await Self.fullAnswers(key) == 2, "nothing was stored: both asked the server")
        // Room again: stored, and the next run answers from it.
        _ = try await CatenaCommandLine.run(["get", url, "--cache", directory.path])
        let warm = try await CatenaCommandLine.run(["get", url, "--cache", directory.path])
        #expect(warm.status == 0 && warm.output == first.output)
        #expect(try await Self.fullAnswers(key) == 3)
    }

    @Test("standard output on a full disk: exit 23 and an error that says so, never a trap")
    func fullOutput() async throws {
        let limited = ["/bin/bash", "-c", #"trap '' XFSZ; ulimit -f 1; exec "$@""#, "bash"]
        let outcome = try await CatenaCommandLine.run(["get", try await Self.url(UUID().uuidString)], wrapper: limited)
        #expect(outcome.status == 23, "\(outcome.status) \(outcome.errors)")
        #expect(outcome.errors.contains("error: cannot write the answer to standard output: File too large"), "\(outcome.errors)")
    }

    @Test("standard output closed early (piped into head -c 1): exit 23 and an error that says so, on both transports", arguments: ["ahc", "urlsession"])
    func closedPipe(transport: String) async throws {
        let early = ["/bin/bash", "-c", #""$@" | head -c 1 > /dev/null; exit "${PIPESTATUS[0]}""#, "bash"]
        let url = try await TestServer.running().baseURL.absoluteString + "/api/bytes/1000000"
        let outcome = try await CatenaCommandLine.run(["get", url, "--transport", transport], wrapper: early)
        #expect(outcome.status == 23, "\(outcome.status) \(outcome.errors)")
        #expect(outcome.errors.contains("error: cannot write the answer to standard output: Broken pipe"), "\(outcome.errors)")
        // Standard error into the same closed pipe: the error has nowhere to go, and still no trap.
        let both = ["/bin/bash", "-c", #""$@" 2>&1 | head -c 1 > /dev/null; exit "${PIPESTATUS[0]}""#, "bash"]
        let silent = try await CatenaCommandLine.run(["get", url, "-v", "--transport", transport], wrapper: both)
        #expect(silent.status == 23, "\(silent.status)")
    }

    /// Whether this machine lets a process make a mount namespace of its own (user
    /// namespaces; Docker's default profile, for one, forbids them).
    static let makesMounts = (try? LocalProcess.exitStatus(["unshare", "-rm", "true"])) == 0

    @Test(
        "a directory on a file system that became read-only: its entries still answer; new answers come from the server",
        .enabled(if: makesMounts, "needs unshare -rm (user and mount namespaces)"))
    func readOnly() async throws {
        let directory = FileManager.default.temporaryDirectory.appending(path: "catena-ro-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (stored, other, revalidating) = (UUID().uuidString, UUID().uuidString, UUID().uuidString)
        let first = try await CatenaCommandLine.run(["get", try await Self.url(stored), "--cache", directory.path])
        #expect(first.status == 0, "\(first.errors)")
        let always = try await CatenaCommandLine.run(["get", try await Self.url(revalidating, "max_age=0"), "--cache", directory.path])
        // A mount namespace of the command's own, with the directory bound read-only in it.
        let readOnly = [
            "/usr/bin/unshare", "-rm", "/bin/sh", "-c", #"mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@""#, directory.path,
        ]
        let hit = try await CatenaCommandLine.run(["get", try await Self.url(stored), "--cache", directory.path], wrapper: readOnly)
        #expect(hit.status == 0 && hit.output == first.output, "\(hit.errors)")
        #expect(try await Self.fullAnswers(stored) == 1, "answered from the read-only directory")
        let miss = try await CatenaCommandLine.run(["get", try await Self.url(other), "--cache", directory.path], wrapper: readOnly)
        #expect(miss.status == 0 && miss.text.contains(other), "\(miss.errors)")
        // Stale there (max-age=0): revalidated, and the 304's refresh cannot be written back.
        let stale = try await CatenaCommandLine.run(["get", try await Self.url(revalidating, "max_age=0"), "--cache", directory.path], wrapper: readOnly)
        #expect(stale.status == 0 && stale.output == always.output, "\(stale.errors)")
        #expect(try await Self.fullAnswers(revalidating) == 1)
        #expect(try await Self.fullAnswers(revalidating, "notModified") == 1)
        #expect(Self.files(directory).filter { $0.hasSuffix(".entry") }.count == 2, "\(Self.files(directory))")
    }

    @Test("six runs storing one entry at once: each gets the whole answer, and one whole entry stays")
    func concurrentRuns() async throws {
        let directory = FileManager.default.temporaryDirectory.appending(path: "catena-race-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = UUID().uuidString
        let url = try await Self.url(key, "max_age=60&size=4000")
        let outcomes = try await withThrowingTaskGroup(of: CatenaCommandLine.Outcome.self) { group in
            for _ in 0..<6 { group.addTask { try await CatenaCommandLine.run(["get", url, "--cache", directory.path]) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let expected = try #require(outcomes.first).output
        #expect(expected.count > 4000)
        for outcome in outcomes { #expect(outcome.status == 0 && outcome.output == expected, "\(outcome.errors)") }
        #expect(Self.files(directory).filter { $0.hasSuffix(".entry") }.count == 1, "\(Self.files(directory))")
        #expect(!Self.files(directory).contains { $0.hasSuffix(".tmp") })
        let asked = try await Self.fullAnswers(key)
        let next = try await CatenaCommandLine.run(["get", url, "--cache", directory.path])
        #expect(next.output == expected)
        #expect(try await Self.fullAnswers(key) == asked, "the entry they left answers the next run")
    }
}
