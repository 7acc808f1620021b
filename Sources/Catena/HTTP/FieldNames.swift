extension String {
    /// Whether this text is `lowercase` with any of its ASCII letters in either case: a
    /// field name compared as HTTP compares them, on the bytes, without making a
    /// lowercased copy.
    ///
    /// Stricter than NIO's own comparison, which masks bit 5 of every byte and so takes
    /// a carriage return for "-": a name here matches only its letters' two cases.
    package func equalsIgnoringASCIICase(_ lowercase: StaticString) -> Bool {
        // `withUTF8Buffer`, not `utf8Start`: a one-scalar literal has no pointer.
        lowercase.withUTF8Buffer { expected in
            utf8.elementsEqual(expected) { byte, lower in
                (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte + 0x20 == lower : byte == lower
            }
        }
    }
}
