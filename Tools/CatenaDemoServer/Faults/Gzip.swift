#if DemoServer
import Foundation

/// Just enough gzip for the faults: stored (uncompressed) blocks, and a bomb.
enum Gzip {
    /// 53 KB that inflate to 8 MiB, made once.
    static let bomb = zeroBomb(inflatedSize: 8 << 20)

    /// 2 MiB that inflate to 2 GiB, made once.
    static let hugeBomb = denseZeroBomb(copies: (1 << 31) / 258)

    /// 512 KiB that inflate to 512 MiB, made once.
    static let largeBomb = denseZeroBomb(copies: (1 << 29) / 258)

    private static let header: [UInt8] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3]

    /// `data` as a valid gzip member made of stored deflate blocks.
    static func stored(_ data: [UInt8]) -> [UInt8] {
        var out = header
        var start = 0
        repeat {
            let end = min(start + 65_535, data.count)
            let length = UInt16(end - start)
            out.append(end == data.count ? 1 : 0)
            out += [UInt8(length & 0xff), UInt8(length >> 8), UInt8(~length & 0xff), UInt8(~length >> 8)]
            out += data[start..<end]
            start = end
        } while start < data.count
        return out + littleEndian(crc32(data)) + littleEndian(UInt32(truncatingIfNeeded: data.count))
    }

    /// A gzip member that inflates to `inflatedSize` zeros (rounded to 2,064-byte
    /// steps): one literal zero, then copies of 258 bytes at distance 1, 13 bits each
    /// with the fixed Huffman code. Its checksum is left zero: the body exists to be
    /// refused before its end.
    static func zeroBomb(inflatedSize: Int) -> [UInt8] {
        // From bit 16 on, eight copies (104 bits) are 13 whole bytes that repeat: write
        // eight and sixteen copies bit by bit, then splice in as many periods as needed.
        func member(copies: Int) -> [UInt8] {
            var bits = BitWriter()
            bits.write(1, count: 1)  // last block
            bits.write(1, count: 2)  // fixed Huffman codes
            bits.writeCode(0b0011_0000, length: 8)  // literal 0
            for _ in 0..<copies {
                bits.writeCode(0b1100_0101, length: 8)  // length 258 (symbol 285)
                bits.writeCode(0, length: 5)  // distance 1
            }
            bits.writeCode(0, length: 7)  // end of block (symbol 256)
            return bits.finished
        }
        let eight = member(copies: 8)
        let period = member(copies: 16)[2..<15]
        let periods = max(1, (inflatedSize - 1) / (258 * 8))
        var deflate = Array(eight[0..<2])
        deflate.reserveCapacity(periods * 13 + 16)
        for _ in 1..<periods { deflate += period }
        deflate += eight[2...]
        let inflated = 1 + 258 * 8 * periods
        return header + deflate + [0, 0, 0, 0] + littleEndian(UInt32(truncatingIfNeeded: inflated))
    }

    /// A gzip member that inflates to `1 + 258 * copies` zeros at two bits a copy: one
    /// dynamic Huffman block whose only codes are literal 0 (`10`), end of block (`11`),
    /// length 258 (`0`) and distance 1 (`0`), so that after the header every copy is
    /// two zero bits and the body is almost all zero bytes. Checksum left zero.
    static func denseZeroBomb(copies: Int) -> [UInt8] {
        var bits = BitWriter()
        bits.write(1, count: 1)  // last block
        bits.write(2, count: 2)  // dynamic Huffman codes
        bits.write(286 - 257, count: 5)  // HLIT: literal/length codes up to 285
        bits.write(0, count: 5)  // HDIST: one distance code
        bits.write(18 - 4, count: 4)  // HCLEN: code length codes in order up to 1
        // Code length code lengths, in the format's order 16, 17, 18, 0, 8, 7, 9, 6, 10,
        // 5, 11, 4, 12, 3, 13, 2, 14, 1: symbol 18 gets 1 bit, symbols 2 and 1 get 2.
        for length in [0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 2] { bits.write(length, count: 3) }
        // Canonical codes: 18 is `0`, 1 is `10`, 2 is `11`.
        func zeros(_ count: Int) {
            bits.writeCode(0, length: 1)  // 18: a run of 11 to 138 zeros
            bits.write(count - 11, count: 7)
        }
        bits.writeCode(0b11, length: 2)  // literal 0: length 2
        zeros(138)
        zeros(117)  // literals 1 to 255 unused
        bits.writeCode(0b11, length: 2)  // end of block: length 2
        zeros(28)  // lengths 257 to 284 unused
        bits.writeCode(0b10, length: 2)  // length 258 (symbol 285): length 1
        bits.writeCode(0b10, length: 2)  // distance 1: length 1
        bits.writeCode(0b10, length: 2)  // the data: one literal 0
        // The copies: two zero bits each, as whole zero bytes once aligned.
        var zeroBits = 2 * copies
        while zeroBits > 0, !bits.isAligned {
            bits.write(0, count: 1)
            zeroBits -= 1
        }
        bits.appendZeroBytes(zeroBits / 8)
        bits.write(0, count: zeroBits % 8)
        bits.writeCode(0b11, length: 2)  // end of block
        let inflated = 1 + 258 * copies
        return header + bits.finished + [0, 0, 0, 0] + littleEndian(UInt32(truncatingIfNeeded: inflated))
    }

    private static func littleEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value & 0xff), UInt8((value >> 8) & 0xff), UInt8((value >> 16) & 0xff), UInt8(value >> 24)]
    }

    static func crc32(_ data: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xffff_ffff
        for byte in data {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xedb8_8320 : crc >> 1 }
        }
        return ~crc
    }

    /// Deflate's bit order: values least significant bit first, Huffman codes most
    /// significant bit first.
    private struct BitWriter {
        var bytes: [UInt8] = []
        private var current: UInt8 = 0
        private var used = 0

        mutating func write(_ value: Int, count: Int) {
            for index in 0..<count { push((value >> index) & 1) }
        }

        mutating func writeCode(_ code: Int, length: Int) {
            for index in stride(from: length - 1, through: 0, by: -1) { push((code >> index) & 1) }
        }

        private mutating func push(_ bit: Int) {
            current |= UInt8(bit) << used
            used += 1
            if used == 8 { bytes.append(current); current = 0; used = 0 }
        }

        var isAligned: Bool { used == 0 }

        mutating func appendZeroBytes(_ count: Int) {
            bytes.append(contentsOf: repeatElement(0, count: count))
        }

        var finished: [UInt8] { used > 0 ? bytes + [current] : bytes }
    }
}
#endif  // DemoServer
