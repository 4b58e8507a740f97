# Turns a text file into a C++ raw string literal: cmake -DIN=... -DOUT=... -DNAME=... -P embed.cmake
file(READ "${IN}" content)
file(WRITE "${OUT}" "const char* const ${NAME} = R\"gpukit_embed(${content})gpukit_embed\";\n")
