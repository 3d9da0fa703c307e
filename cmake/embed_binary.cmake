# Writes a C++ source defining a byte array with a file's contents:
#   cmake -DINPUT=file -DOUTPUT=source.cpp -DSYMBOL=name -P embed_binary.cmake
# defines extern "C" const unsigned char name[] and const size_t nameBytes.
file(READ ${INPUT} hex HEX)
string(LENGTH "${hex}" length)
math(EXPR bytes "${length} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" body "${body}")
file(WRITE ${OUTPUT} "// Generated from ${INPUT} by cmake/embed_binary.cmake: do not edit.\n#include <cstddef>\nextern \"C\" __attribute__((aligned(16))) const unsigned char ${SYMBOL}[] = {\n${body}\n};\nextern \"C\" const size_t ${SYMBOL}Bytes = ${bytes};\n")
