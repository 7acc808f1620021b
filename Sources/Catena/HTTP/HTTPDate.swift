package import Foundation

/// HTTP dates (RFC 9110 §5.6.7): IMF-fixdate, and the two obsolete forms on input.
///
/// Read by hand rather than with `DateFormatter`: a formatter is costly to make, not
/// documented as safe to share between threads in corelibs Foundation, and lenient in
/// ways a server's bytes should not steer. This reads the three grammars exactly,
/// checks every field's range, and never traps.
package enum HTTPDate {
    private static let monthNames = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
    private static let shortDays = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
    private static let longDays = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]

    /// The date `text` names, or nil.
    package static func parse(_ text: String) -> Date? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard trimmed.utf8.count <= 64 else { return nil }
        var reader = Reader(Array(trimmed.utf8))
        if let date = reader.attempt(imfFixdate) { return date }
        if let date = reader.attempt(rfc850) { return date }
        return reader.attempt(asctime)
    }

    /// `date` as an IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT". Dates outside years
    /// 1...9999 are clamped to them (NaN reads as 1970).
    package static func format(_ date: Date) -> String {
        let limit = 253_402_300_799.0  // 9999-12-31T23:59:59Z
        let raw = date.timeIntervalSince1970
        let clamped = raw.isNaN ? 0 : min(max(raw.rounded(.down), -62_135_596_800), limit)
        let seconds = Int64(clamped)
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = Int(seconds - days * 86_400)
        let (year, month, day) = civil(fromDays: days)
        let weekday = Int(((days % 7) + 7 + 3) % 7)  // 1970-01-01 was a Thursday (index 3)
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let yearText = String(repeating: "0", count: max(0, 4 - String(year).count)) + String(year)
        return "\(shortDays[weekday].capitalized), \(two(day)) \(monthNames[month - 1].capitalized) \(yearText) "
            + "\(two(secondOfDay / 3600)):\(two(secondOfDay / 60 % 60)):\(two(secondOfDay % 60)) GMT"
    }

    // MARK: The three grammars

    /// "Sun, 06 Nov 1994 08:49:37 GMT"
    private static func imfFixdate(_ r: inout Reader) -> Date? {
        guard r.word(in: shortDays) != nil, r.literal(","), r.literal(" "),
            let day = r.digits(2), r.literal(" "), let month = r.word(in: monthNames), r.literal(" "),
            let year = r.digits(4), r.literal(" "), let time = r.time(), r.literal(" "), r.literal("GMT"), r.atEnd
        else { return nil }
        return date(year: year, month: month + 1, day: day, time: time)
    }

    /// "Sunday, 06-Nov-94 08:49:37 GMT"
    private static func rfc850(_ r: inout Reader) -> Date? {
        guard r.word(in: longDays) != nil, r.literal(","), r.literal(" "),
            let day = r.digits(2), r.literal("-"), let month = r.word(in: monthNames), r.literal("-"),
            let shortYear = r.digits(2), r.literal(" "), let time = r.time(), r.literal(" "), r.literal("GMT"), r.atEnd
        else { return nil }
        // RFC 9110: a two-digit year that looks more than 50 years ahead is in the past century.
        let thisYear = civil(fromDays: Int64(Date().timeIntervalSince1970 / 86_400)).year
        var year = thisYear / 100 * 100 + shortYear
        if year > thisYear + 50 { year -= 100 }
        return date(year: year, month: month + 1, day: day, time: time)
    }

    /// "Sun Nov  6 08:49:37 1994"
    private static func asctime(_ r: inout Reader) -> Date? {
        guard r.word(in: shortDays) != nil, r.literal(" "), let month = r.word(in: monthNames), r.literal(" ") else { return nil }
        let day: Int
        if r.literal(" ") {
            guard let digit = r.digits(1) else { return nil }
            day = digit
        } else {
            guard let digits = r.digits(2) else { return nil }
            day = digits
        }
        guard r.literal(" "), let time = r.time(), r.literal(" "), let year = r.digits(4), r.atEnd else { return nil }
        return date(year: year, month: month + 1, day: day, time: time)
    }

    // MARK: Calendar arithmetic (proleptic Gregorian, UTC)

    private static func date(year: Int, month: Int, day: Int, time: (hour: Int, minute: Int, second: Int)) -> Date? {
        guard (1...9999).contains(year), (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year),
            (0...23).contains(time.hour), (0...59).contains(time.minute), (0...60).contains(time.second)
        else { return nil }
        let days = self.days(fromYear: Int64(year), month: Int64(month), day: Int64(day))
        // A leap second (":60") is read as the last second of its minute.
        let seconds = days * 86_400 + Int64(time.hour * 3600 + time.minute * 60 + min(time.second, 59))
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days since 1970-01-01 (Howard Hinnant's days_from_civil).
    private static func days(fromYear y: Int64, month m: Int64, day d: Int64) -> Int64 {
        let y = m <= 2 ? y - 1 : y
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// The date of a day since 1970-01-01 (the inverse of the above).
    private static func civil(fromDays days: Int64) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (Int(yoe + era * 400 + (month <= 2 ? 1 : 0)), Int(month), Int(day))
    }

    /// A cursor over ASCII bytes; every read checks its bounds.
    private struct Reader {
        let bytes: [UInt8]
        var index = 0

        init(_ bytes: [UInt8]) { self.bytes = bytes }

        var atEnd: Bool { index == bytes.count }

        /// Runs `grammar` from the start; the result, or nil with nothing consumed.
        mutating func attempt(_ grammar: (inout Reader) -> Date?) -> Date? {
            index = 0
            return grammar(&self)
        }

        mutating func literal(_ text: StaticString) -> Bool {
            let count = text.utf8CodeUnitCount
            guard bytes.count - index >= count else { return false }
            for offset in 0..<count where bytes[index + offset] != text.utf8Start[offset] { return false }
            index += count
            return true
        }

        /// Exactly `count` ASCII digits.
        mutating func digits(_ count: Int) -> Int? {
            guard bytes.count - index >= count else { return nil }
            var value = 0
            for offset in 0..<count {
                let byte = bytes[index + offset]
                guard byte >= 0x30, byte <= 0x39 else { return nil }
                value = value * 10 + Int(byte - 0x30)
            }
            index += count
            return value
        }

        /// The index in `words` of the letters at the cursor, compared without case.
        mutating func word(in words: [String]) -> Int? {
            var end = index
            while end < bytes.count, (bytes[end] | 0x20) >= 0x61, (bytes[end] | 0x20) <= 0x7A { end += 1 }
            let found = String(decoding: bytes[index..<end].map { $0 | 0x20 }, as: UTF8.self)
            guard let position = words.firstIndex(of: found) else { return nil }
            index = end
            return position
        }

        /// "HH:MM:SS"
        mutating func time() -> (hour: Int, minute: Int, second: Int)? {
            guard let hour = digits(2), literal(":"), let minute = digits(2), literal(":"), let second = digits(2) else { return nil }
            return (hour, minute, second)
        }
    }
}
