# Turns every DIR/*.json into an initializer {"name", R"(text)"}, one per line, for an array of
# {name, text} pairs, in name order: cmake -DDIR=... -DOUT=... -P embed_dir.cmake
file(GLOB paths "${DIR}/*.json")
list(SORT paths)
set(out "")
foreach(path ${paths})
  get_filename_component(name "${path}" NAME)
  file(READ "${path}" content)
  string(APPEND out "{\"${name}\", R\"gpukit_embed(${content})gpukit_embed\"},\n")
endforeach()
file(WRITE "${OUT}" "${out}")
