/// A page of a paged list: its items, its number (from 1), and how many pages there are.
public protocol PagedContent: Sendable {
    associatedtype Item: Sendable
    /// The items on this page.
    var items: [Item] { get }
    /// This page's number, from 1.
    var pageNumber: Int { get }
    /// How many pages the list has.
    var pageCount: Int { get }
}

/// The pages of a paged list loaded so far.
public struct Pages<Page: PagedContent>: Sendable {
    /// Every item of the loaded pages, in order.
    public var items: [Page.Item]
    /// How many pages are loaded.
    public var loadedPages: Int
    /// How many pages the list has, as the last page said.
    public var pageCount: Int

    /// Pages loaded so far; `Pages()` is none yet.
    public init(items: [Page.Item] = [], loadedPages: Int = 0, pageCount: Int = 1) {
        self.items = items
        self.loadedPages = loadedPages
        self.pageCount = pageCount
    }

    /// Whether a next page exists.
    public var hasNextPage: Bool { loadedPages < pageCount }

    /// `page` added to these pages.
    public func appending(_ page: Page) -> Pages {
        Pages(items: items + page.items, loadedPages: loadedPages + 1, pageCount: page.pageCount)
    }
}

extension ContentLoader {
    /// A loader that appends page after page: ``startLoading()`` loads the next page
    /// (and returns false after the last), ``refresh()`` starts again from page 1.
    /// `endpoint` makes the endpoint for a page number, from 1.
    public convenience init<E: Endpoint>(
        client: Client,
        pages endpoint: @escaping @Sendable (_ page: Int) -> E
    ) where E.Content: PagedContent, Content == Pages<E.Content> {
        self.init(
            load: { current in
                let pages = current ?? Pages()
                return pages.appending(try await client.send(endpoint(pages.loadedPages + 1)))
            },
            hasMore: { $0.hasNextPage }
        )
    }
}
