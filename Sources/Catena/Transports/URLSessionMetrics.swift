import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What one transaction of a task's `URLSessionTaskMetrics` says of its connection, read
/// into plain values.
///
/// Apple's URLSession delivers metrics; corelibs on Linux never does
/// (swift-corelibs-foundation#4988), though it declares the same types. The reading is
/// property reads only, compiled on both; everything made of them is tested through
/// ``init(isNetworkLoad:isReused:fetchStart:connectEnd:requestEnd:remoteAddress:remotePort:localPort:protocolName:tlsVersion:cipherSuite:)``,
/// as neither platform lets a test make a metrics object.
struct URLSessionTransaction: Sendable, Equatable {
    /// Whether the transaction went to the network (not a cache, not a server push).
    var isNetworkLoad: Bool
    var isReused: Bool
    var fetchStart: Date?
    /// When the connection was ready, TLS included; nil for a reused one.
    var connectEnd: Date?
    var requestEnd: Date?
    var remoteAddress: String?
    var remotePort: Int?
    var localPort: Int?
    /// ALPN's name for the protocol: `http/1.1`, `h2`, `h3`.
    var protocolName: String?
    /// The TLS version and cipher suite as IANA numbers.
    var tlsVersion: UInt16?
    var cipherSuite: UInt16?

    init(
        isNetworkLoad: Bool, isReused: Bool, fetchStart: Date?, connectEnd: Date?, requestEnd: Date?, remoteAddress: String?,
        remotePort: Int?, localPort: Int?, protocolName: String?, tlsVersion: UInt16?, cipherSuite: UInt16?
    ) {
        self.isNetworkLoad = isNetworkLoad
        self.isReused = isReused
        self.fetchStart = fetchStart
        self.connectEnd = connectEnd
        self.requestEnd = requestEnd
        self.remoteAddress = remoteAddress
        self.remotePort = remotePort
        self.localPort = localPort
        self.protocolName = protocolName
        self.tlsVersion = tlsVersion
        self.cipherSuite = cipherSuite
    }

    init(_ metrics: URLSessionTaskTransactionMetrics) {
        self.init(
            isNetworkLoad: metrics.resourceFetchType == .networkLoad, isReused: metrics.isReusedConnection,
            fetchStart: metrics.fetchStartDate, connectEnd: metrics.connectEndDate, requestEnd: metrics.requestEndDate,
            remoteAddress: metrics.remoteAddress, remotePort: Self.port(metrics.remotePort), localPort: Self.port(metrics.localPort),
            protocolName: metrics.networkProtocolName, tlsVersion: metrics.negotiatedTLSProtocolVersion?.rawValue,
            cipherSuite: metrics.negotiatedTLSCipherSuite?.rawValue)
    }

    /// A port as Apple declares it (`Int?`), or as corelibs does (`String?`): overloads,
    /// so the one reading above compiles on both.
    static func port(_ port: Int?) -> Int? { port }
    static func port(_ port: String?) -> Int? { port.flatMap { Int($0) } }

    /// The connection of a task's last network transaction (Catena follows redirects
    /// itself, so a task has one), and when its request was sent; nil when none went to
    /// the network or URLSession did not name its protocol.
    static func seen(in metrics: URLSessionTaskMetrics) -> (connection: ConnectionInfo, requestSent: Duration?)? {
        metrics.transactionMetrics.last(where: { $0.resourceFetchType == .networkLoad }).flatMap { Self($0).seen }
    }

    /// This transaction's connection, and when its request was sent, both measured from
    /// its fetch's start.
    var seen: (connection: ConnectionInfo, requestSent: Duration?)? {
        guard isNetworkLoad, let protocolName, let httpVersion = Self.httpVersion(alpn: protocolName) else { return nil }
        let connection = ConnectionInfo(
            isReused: isReused, readyAfter: isReused ? nil : Self.interval(from: fetchStart, to: connectEnd),
            remoteAddress: remoteAddress, remotePort: remotePort, localPort: localPort, httpVersion: httpVersion,
            tlsVersion: tlsVersion.map(Self.tlsName), tlsCipherSuite: cipherSuite.map(Self.cipherSuiteName))
        return (connection, Self.interval(from: fetchStart, to: requestEnd))
    }

    /// In whole microseconds (a date this century carries no finer ones); nil unless both
    /// dates are there, in order and within a day: a clock stepped between them tells nothing.
    private static func interval(from start: Date?, to end: Date?) -> Duration? {
        guard let start, let end else { return nil }
        let seconds = end.timeIntervalSince(start)
        guard seconds.isFinite, seconds >= 0, seconds < 86_400 else { return nil }
        return .microseconds(Int64((seconds * 1e6).rounded()))
    }

    /// ALPN's protocol IDs (RFC 7301's registry) as ``ConnectionInfo/httpVersion`` names them.
    static func httpVersion(alpn: String) -> String? {
        switch alpn.lowercased() {
        case "http/1.0": "1.0"
        case "http/1.1": "1.1"
        case "h2", "h2c": "2"
        case "h3": "3"
        // Drafts of HTTP/3 Apple has reported (h3-29).
        case let name where name.hasPrefix("h3-"): "3"
        default: nil
        }
    }

    /// The protocol's name as ``ConnectionInfo/tlsVersion`` gives it, by its IANA number.
    static func tlsName(_ version: UInt16) -> String {
        switch version {
        case 0x0301: "TLSv1.0"
        case 0x0302: "TLSv1.1"
        case 0x0303: "TLSv1.2"
        case 0x0304: "TLSv1.3"
        case 0xFEFF: "DTLSv1.0"
        case 0xFEFD: "DTLSv1.2"
        default: hex(version)
        }
    }

    /// The suites Apple's TLS offers by default, by their IANA names; any other as its number.
    static func cipherSuiteName(_ suite: UInt16) -> String {
        switch suite {
        case 0x1301: "TLS_AES_128_GCM_SHA256"
        case 0x1302: "TLS_AES_256_GCM_SHA384"
        case 0x1303: "TLS_CHACHA20_POLY1305_SHA256"
        case 0xC02B: "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"
        case 0xC02C: "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"
        case 0xC02F: "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"
        case 0xC030: "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"
        case 0xCCA8: "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256"
        case 0xCCA9: "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"
        default: hex(suite)
        }
    }

    private static func hex(_ value: UInt16) -> String {
        let digits = String(value, radix: 16, uppercase: true)
        return "0x" + String(repeating: "0", count: 4 - digits.count) + digits
    }
}
