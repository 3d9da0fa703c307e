/* Compiles tutti/tutti.h as C and names every extension it declares. */
#include "tutti/tutti.h"

typedef void (*AnyFunction)(void);
static const AnyFunction everyExtension[] = {
    (AnyFunction)tuttiStreamCreate,     (AnyFunction)tuttiStreamSynchronize, (AnyFunction)tuttiStreamQuery,
    (AnyFunction)tuttiStreamDestroy,    (AnyFunction)tuttiVersionString,     (AnyFunction)tuttiCommDeviceBackend,
    (AnyFunction)tuttiCommAlgorithm,    (AnyFunction)tuttiCommProtocol,      (AnyFunction)tuttiCommTransports,
    (AnyFunction)tuttiCommNodeTopology, (AnyFunction)tuttiCommNodeNic,       (AnyFunction)tuttiCommDescribeWait,
    (AnyFunction)tuttiCommDump,         (AnyFunction)tuttiCommZeroCopyReads, (AnyFunction)tuttiAllToAllvDevice,
    (AnyFunction)tuttiAllToAllvDynamic};

int tutti_abi_extension_count(void);
int tutti_abi_extension_count(void) { return (int)(sizeof everyExtension / sizeof everyExtension[0]); }
