import Foundation

/// HTTP dates (RFC 9110 §5.6.7): IMF-fixdate, and the two obsolete forms on input.
enum HTTPDate {
    private static let formats = ["EEE, dd MMM yyyy HH:mm:ss zzz", "EEEE, dd-MMM-yy HH:mm:ss zzz", "EEE MMM d HH:mm:ss yyyy"]

    private static func formatter(_ format: String) -> DateFormatter {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = format
        return formatter
    }

    /// The date `text` names, or nil.
    static func parse(_ text: String) -> Date? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        for format in formats {
            if let date = formatter(format).date(from: trimmed) { return date }
        }
        return nil
    }

    /// `date` as an IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT".
    static func format(_ date: Date) -> String {
        formatter("EEE, dd MMM yyyy HH:mm:ss 'GMT'").string(from: date)
    }
}
