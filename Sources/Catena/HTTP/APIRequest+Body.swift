public import Foundation
import HTTPTypes

extension APIRequest {
    /// Produces the body's bytes for one attempt, and reports their count to the
    /// request's observers (``CallEvent/bodySent(bytes:)``): transports call it once
    /// per attempt they send.
    ///
    /// - Throws: ``CatenaError/Code/invalidRequest`` naming the body's kind when it
    ///   cannot be produced (a value that fails to encode, say).
    public func bodyData() async throws(CatenaError) -> Data? {
        guard body.stream != nil else { return try inMemoryBodyData() }
        do {
            let data = try await body.makeData()
            if let data { report(.bodySent(bytes: Int64(data.count))) }
            return data
        } catch {
            throw bodyFailure(error)
        }
    }

    /// ``bodyData()`` for a body made in memory (``Body/stream`` is nil), without
    /// suspending: a transport's synchronous preparation of a call can make it.
    package func inMemoryBodyData() throws(CatenaError) -> Data? {
        precondition(body.stream == nil, "a streamed body is read with bodyData()")
        do {
            let data = try body.producedData()
            if let data { report(.bodySent(bytes: Int64(data.count))) }
            return data
        } catch {
            throw bodyFailure(error)
        }
    }

    private func bodyFailure(_ error: any Error) -> CatenaError {
        CatenaError(.invalidRequest, request: self, underlyingError: error, detail: "the \(body.kind) body could not be produced")
    }
}

extension APIRequest {
    /// `contentType` (a body's, which any text can be) when it can go out as a field
    /// value; set as it is, a CR or LF in it would start a field of its own.
    ///
    /// - Throws: ``CatenaError/Code/invalidRequest`` when it has a control character or a
    ///   space at an end.
    package func checkedContentType(_ contentType: String) throws(CatenaError) -> String {
        guard HTTPField.isValidValue(contentType) else {
            throw CatenaError(
                .invalidRequest, request: self,
                detail: "the body's content type is not a valid field value (it has a control character, or a space at an end)")
        }
        return contentType
    }
}
