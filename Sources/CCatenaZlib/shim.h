// The system's zlib, for permessage-deflate (RFC 7692) in CatenaAsyncHTTPClient.
#include <zlib.h>
